// [node][process][resources] A node short of an operating-system resource:
// each shortage is a typed error where it happens, never a crash or a hang,
// and what was refused leaves nothing behind.
//   - the shared-memory filesystem too small for the pools (a small tmpfs on
//     /dev/shm in a private mount namespace: needs root; skipped otherwise);
//   - a file-descriptor limit that refuses connections.
#include <sys/stat.h>

#include <filesystem>

#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

std::string repo_file(const std::string& relative) { return std::string(KVRT_SOURCE_DIR) + "/" + relative; }

size_t open_fds(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("a shared-memory filesystem too small for the pools: storage_exhausted, and no segment left",
          "[node][process][resources]") {
  // The test configuration's segment sizes, from a node that fits.
  ScratchDir dir("shm-full");
  std::vector<uint64_t> sizes;
  {
    InProcessNode fits(dir);
    for (const PoolAttachment& p : fits.descriptor.pools) {
      struct stat st {};
      REQUIRE(::stat(("/dev/shm/" + p.segment_name).c_str(), &st) == 0);
      sizes.push_back(static_cast<uint64_t>(st.st_size));
    }
  }
  REQUIRE(sizes.size() >= 2);
  if (!std::filesystem::exists("/usr/bin/unshare")) {
    WARN("skipped: no /usr/bin/unshare");
    return;
  }
  // Room for the first pool and half the second: the second fails after the
  // first was created, which must then be removed too.
  const uint64_t room = ((sizes[0] + sizes[1] / 2) / 4096 + 1) * 4096;
  const std::string script = "mount -t tmpfs -o size=" + std::to_string(room) + " kvrt-test /dev/shm || exit 77\n\"" +
                             std::string(KVRT_BINARY) + "\" node --config " +
                             repo_file("tests/data/node/node-test.toml") + " --descriptor " + dir.file("node.json") +
                             "\necho \"node exit $?\"\necho \"segments left $(ls -A /dev/shm | wc -l)\"\n";
  KvrtProcess shell("/usr/bin/unshare", {"--mount", "/bin/sh", "-c", script}, dir.file("shell.log"));
  const int status = shell.wait(std::chrono::seconds(60));
  const std::string out = shell.output();
  INFO(out);
  if (status == 77 || out.find("node exit") == std::string::npos) {
    WARN("skipped: no private mount namespace with a tmpfs here (needs root)");
    return;
  }
  CHECK(out.find("node exit 2") != std::string::npos);
  CHECK(out.find("storage_exhausted") != std::string::npos);
  CHECK(out.find("segments left 0") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("node.json")));  // it never served
}

TEST_CASE("a node at its file-descriptor limit refuses connections with a typed error and serves again",
          "[node][process][resources]") {
  ScratchDir dir("fd-limit");
  const std::string descriptor_path = dir.file("node.json");
  // About a dozen descriptors at rest: room for a few workers, not for 32.
  KvrtProcess node("/bin/sh",
                   {"-c", "ulimit -n 40 && exec \"" + std::string(KVRT_BINARY) + "\" node --config " +
                              repo_file("tests/data/node/node-test.toml") + " --descriptor " + descriptor_path},
                   dir.file("node.log"));
  NodeDescriptor d;
  for (int i = 0;; ++i) {
    Result<NodeDescriptor> r = read_node_descriptor(descriptor_path);
    if (r.ok() && r->node_pid == static_cast<uint32_t>(node.pid())) {
      d = *r;
      break;
    }
    if (i > 1500) FAIL("the node did not start; log:\n" << node.output());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const size_t fds_at_rest = open_fds(node.pid());
  std::vector<std::unique_ptr<KvrtProcess>> workers;
  for (int i = 0; i < 32; ++i)
    workers.push_back(std::make_unique<KvrtProcess>(
        std::vector<std::string>{"worker", "--node", descriptor_path, "--principal", "worker-" + std::to_string(i % 3),
                                 "--duration", "2", "--seed", std::to_string(i + 1)},
        dir.file("worker-" + std::to_string(i) + ".log")));
  int served = 0, refused = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    const int status = workers[i]->wait(std::chrono::seconds(90));
    const std::string out = workers[i]->output();
    INFO("worker " << i << " exited " << status << ":\n" << out);
    if (status == 0) {
      ++served;
    } else {
      // Refused for the node's limit: a typed error, never a hang or a crash.
      CHECK(status == 2);
      CHECK(out.find("node_unreachable") != std::string::npos);
      ++refused;
    }
  }
  INFO("served " << served << ", refused " << refused << "; node log:\n" << node.output());
  CHECK(served > 0);
  CHECK(refused > 0);  // the limit was reached
  // The node is alive, gave back every connection's descriptors and serves.
  REQUIRE(::kill(node.pid(), 0) == 0);
  for (int i = 0; i < 100 && open_fds(node.pid()) > fds_at_rest; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(open_fds(node.pid()) <= fds_at_rest);
  KvrtProcess again({"worker", "--node", descriptor_path, "--principal", "worker-0", "--duration", "1"},
                    dir.file("again.log"));
  CHECK(again.wait(std::chrono::seconds(60)) == 0);
  node.signal(SIGTERM);
  CHECK(node.wait(std::chrono::seconds(30)) == 0);
}

}  // namespace kvrt::test
