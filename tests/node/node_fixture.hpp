#pragma once
// Process fixtures of the node tests: a `kvrt node` or `kvrt
// worker` child process with its output in a file, signalled and reaped by
// the test; and a scratch directory per test so that parallel CTest runs
// never share a descriptor.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/client.hpp"
#include "actors/node_runtime.hpp"
#include "services/common/child_process.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt::test {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("kvrt-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

// A child process running the kvrt binary; stdout and stderr go to `log`.
// The child gets SIGTERM when this test process dies (spawn_tied_child): a
// test that aborts (a failed assertion in a destructor, a sanitizer report)
// must not leave a node holding segments and a core under every later test.
// SIGTERM, not SIGKILL: a node shuts down cleanly and removes its segments.
class KvrtProcess {
 public:
  KvrtProcess(const std::vector<std::string>& args, const std::string& log) : KvrtProcess(KVRT_BINARY, args, log) {}
  // Another program (a shell that limits or isolates the kvrt it starts).
  KvrtProcess(const std::string& program, const std::vector<std::string>& args, const std::string& log) : log_(log) {
    Result<pid_t> pid = spawn_tied_child(program, args, ChildOutput{-1, log, {}, true}, SIGTERM);
    INFO((pid.ok() ? std::string("ok") : pid.error().describe()));
    REQUIRE(pid.ok());
    pid_ = *pid;
  }
  ~KvrtProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  KvrtProcess(const KvrtProcess&) = delete;
  KvrtProcess& operator=(const KvrtProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Exit code (128 + signal when killed); waits at most `limit`.
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (true) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        FAIL("process " << pid_ << " did not exit in time; log:\n" << output());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string output() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// `kvrt <args> --node DIR/node.json` run to its end, as an operator runs an
// admin command against the test's node; checks its exit code and returns
// its output.
inline std::string run_kvrt_against_node(const ScratchDir& dir, std::vector<std::string> args, int expect_rc) {
  args.insert(args.end(), {"--node", dir.file("node.json")});
  KvrtProcess p(args, dir.file("admin.log"));
  const int rc = p.wait();
  const std::string out = p.output();
  INFO(out);
  CHECK(rc == expect_rc);
  return out;
}

// A `kvrt node` child on the test configuration, ready when its descriptor
// exists; stopped with SIGTERM (a clean shutdown) by stop() or the destructor.
class NodeProcess {
 public:
  // `extra_args` follow `node`; `global_args` precede it (`--log-level debug`).
  explicit NodeProcess(const ScratchDir& dir, std::vector<std::string> extra_args = {},
                       const std::string& config = "tests/data/node/node-test.toml",
                       std::vector<std::string> global_args = {})
      : descriptor_path_(dir.file("node.json")),
        process_(node_args(config, descriptor_path_, std::move(extra_args), std::move(global_args)),
                 dir.file("node.log")) {
    // Ready when the descriptor names this process: one a killed node left
    // at the same path is not (the new node replaces it).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      Result<NodeDescriptor> d = read_node_descriptor(descriptor_path_);
      if (d.ok() && d->node_pid == static_cast<uint32_t>(process_.pid())) {
        descriptor_ = std::move(*d);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) FAIL("the node did not start; log:\n" << process_.output());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~NodeProcess() {
    if (!stopped_) stop();
  }
  static std::vector<std::string> node_args(const std::string& config, const std::string& descriptor,
                                            std::vector<std::string> extra, std::vector<std::string> global) {
    std::vector<std::string> args = std::move(global);
    // Relative to the source tree, or absolute (a config a test wrote).
    const std::string path = config.starts_with('/') ? config : std::string(KVRT_SOURCE_DIR) + "/" + config;
    const std::vector<std::string> node{"node", "--config", path, "--descriptor", descriptor};
    args.insert(args.end(), node.begin(), node.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  int stop() {
    stopped_ = true;
    process_.signal(SIGTERM);
    process_.signal(SIGCONT);  // a node a test left stopped acts on the SIGTERM too
    return process_.wait();
  }
  // SIGKILL: the node cleans up nothing (descriptor, tokens, sockets and
  // segments stay behind); reaped before this returns.
  int kill() {
    stopped_ = true;
    process_.signal(SIGKILL);
    return process_.wait();
  }
  // SIGSTOP / SIGCONT: a hung node.
  void signal(int sig) const { process_.signal(sig); }
  // SIGSTOP, returning once the kernel shows the node stopped (a signal is
  // delivered asynchronously: a node on another core may answer one more
  // call first).
  void stop_and_wait() const {
    process_.signal(SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      std::ifstream stat("/proc/" + std::to_string(process_.pid()) + "/stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const size_t paren = text.rfind(')');
      if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T') return;
      if (std::chrono::steady_clock::now() > deadline) FAIL("the node did not stop");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  pid_t pid() const { return process_.pid(); }
  const NodeDescriptor& descriptor() const { return descriptor_; }
  const std::string& descriptor_path() const { return descriptor_path_; }
  std::string log() const { return process_.output(); }
  NodeStats stats() const {
    Result<NodeStats> s = read_node_stats(descriptor_, /*validate=*/true);
    INFO((s.ok() ? std::string("ok") : s.error().describe()));
    REQUIRE(s.ok());
    return *s;
  }

 private:
  std::string descriptor_path_;
  KvrtProcess process_;
  NodeDescriptor descriptor_;
  bool stopped_ = false;
};

// tests/data/node/node-test.toml copied into `dir` (node.toml) with its
// layout path made absolute, the [node] keys in `drop` removed, `extra`
// lines added at the top of [node] and `tables` (whole tables) at the end;
// answers the copy's path.
inline std::string test_node_config(const ScratchDir& dir, const std::string& extra,
                                    std::initializer_list<std::string> drop = {}, const std::string& tables = "") {
  std::ifstream in(std::string(KVRT_SOURCE_DIR) + "/tests/data/node/node-test.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string layout_key = "layout = \"";
  const size_t layout = config.find(layout_key);
  REQUIRE(layout != std::string::npos);
  config.insert(layout + layout_key.size(), std::string(KVRT_SOURCE_DIR) + "/tests/data/node/");
  for (const std::string& key : drop) {
    const size_t at = config.find("\n" + key + " ");
    REQUIRE(at != std::string::npos);
    config.erase(at + 1, config.find('\n', at + 1) - at);
  }
  const size_t node_table = config.find("[node]\n");
  REQUIRE(node_table != std::string::npos);
  config.insert(node_table + 7, extra);
  config += "\n" + tables;
  const std::string path = dir.file("node.toml");
  std::ofstream(path) << config;
  return path;
}

// A NodeInstance in this process on a test configuration (tests/data/node),
// with sessions opened by principal name: the protocol tests talk to it over
// loopback like any worker.
struct InProcessNode {
  explicit InProcessNode(const ScratchDir& dir, const std::string& config = "tests/data/node/node-test.toml") {
    NodeRunOptions o;
    // Relative to the source tree, or absolute (a config a test wrote).
    o.config_path = config.starts_with('/') ? config : std::string(KVRT_SOURCE_DIR) + "/" + config;
    o.descriptor_path = dir.file("node.json");
    Result<std::unique_ptr<NodeInstance>> started = NodeInstance::start(o);
    INFO((started.ok() ? std::string("ok") : started.error().describe()));
    REQUIRE(started.ok());
    node = std::move(*started);
    descriptor = read_node_descriptor(o.descriptor_path).value();
  }
  std::unique_ptr<Client> connect(const std::string& principal) const {
    Result<std::unique_ptr<Client>> c =
        Client::connect(descriptor, read_token_file(descriptor.token_path(principal)).value());
    INFO((c.ok() ? std::string("ok") : c.error().describe()));
    REQUIRE(c.ok());
    return std::move(*c);
  }
  // One owner's statistic, read live; every owner must validate.
  bool has_stat(const std::string& owner, const std::string& name) const {
    Result<NodeStats> s = read_node_stats(descriptor, /*validate=*/false);
    REQUIRE(s.ok());
    return s->value(owner, name).has_value();
  }
  int64_t stat(const std::string& owner, const std::string& name) const {
    Result<NodeStats> s = read_node_stats(descriptor, /*validate=*/true);
    REQUIRE(s.ok());
    for (const OwnerStats& o : s->owners) {
      INFO(o.owner << ": " << o.validate_error);
      CHECK(o.validate_ok);
    }
    const std::optional<int64_t> v = s->value(owner, name);
    INFO(owner << "." << name);
    REQUIRE(v.has_value());
    return *v;
  }
  std::unique_ptr<NodeInstance> node;
  NodeDescriptor descriptor;
};

// Polls the node until `done(stats)` holds or the time is up.
template <class Done>
NodeStats await_stats(const NodeProcess& node, Done done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  NodeStats s = node.stats();
  while (!done(s) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s = node.stats();
  }
  return s;
}

// Whether the node holds nothing for any worker. A session's end reaches
// the gateway first and the owners after it, on other mailboxes, so a stats
// snapshot may see no worker while an owner has yet to release its holdings.
inline bool is_quiescent(const NodeStats& s) {
  return s.value("node", "workers_connected") == 0 && s.value("allocator", "live_requests") == 0 &&
         s.value("allocator", "live_leases") == 0 && s.value("allocator", "pool0_live_blocks") == 0 &&
         s.value("node", "reuse_open_attempts") == 0;
}

// Polls until every session has ended and every owner has released it.
inline NodeStats await_quiescent(const NodeProcess& node, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  return await_stats(node, is_quiescent, limit);
}

// The invariants every node must show once no worker holds anything.
inline void require_quiescent(const NodeStats& s) {
  for (const OwnerStats& o : s.owners) {
    INFO(o.owner << ": " << o.validate_error);
    CHECK(o.validate_ok);
  }
  CHECK(s.value("allocator", "leaked_blocks") == 0);
  CHECK(s.value("allocator", "refcount_delta") == 0);
  CHECK(s.value("allocator", "live_requests") == 0);
  CHECK(s.value("allocator", "live_leases") == 0);
  CHECK(s.value("allocator", "pool0_live_blocks") == 0);
  CHECK(s.value("node", "workers_connected") == 0);
  CHECK(s.value("node", "reuse_open_attempts") == 0);  // no reuse attempt outlives its session
}

}  // namespace kvrt::test
