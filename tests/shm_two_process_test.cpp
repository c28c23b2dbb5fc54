// Two processes share a pool (issue 3 "Tests": one allocates and writes rows
// through the pool, the other attaches by name and reads exactly those bytes).
// The peer is a separate executable (kvrt_shm_peer) started with posix_spawn,
// so it shares nothing with this process but the segment's name and a few
// numbers on its command line; it answers with a SHA-256 on a pipe.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "shm_peer_protocol.hpp"
#include "shm_test_fixture.hpp"

extern char** environ;

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

struct PeerResult {
  int exit_code = -1;
  std::string output;  // stdout, trailing newline removed
  std::string errors;  // stderr
};

std::string drain(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

PeerResult run_peer(const std::vector<std::string>& args) {
  int out[2], err[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(err) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  for (int fd : {out[0], out[1], err[0], err[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<std::string> argv_storage{KVRT_SHM_PEER};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, KVRT_SHM_PEER, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  REQUIRE(rc == 0);
  PeerResult result;
  // The peer writes one short line to either stream, far below a pipe's
  // buffer, so draining them one after the other cannot block it.
  result.output = drain(out[0]);
  result.errors = drain(err[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!result.output.empty() && result.output.back() == '\n') result.output.pop_back();
  return result;
}

std::vector<std::string> peer_args(const char* mode, const BlockPoolSegment& pool, PoolGeneration generation,
                                   const std::vector<peer::RowSelection>& rows) {
  return {mode,
          pool.name(),
          std::to_string(pool.pool_id().value),
          std::to_string(generation.value),
          pool.layout_digest().hex(),
          peer::format_selection(rows)};
}

// Blocks and row ranges touched: whole blocks, a partial tail and one row,
// so both the one-run (slot-major) and many-run (layer-major) paths cross.
const std::vector<peer::RowSelection> kRows{{1, 0, 16}, {4, 3, 11}, {0, 15, 16}};

}  // namespace

TEST_CASE("a second process reads exactly the rows this process wrote", "[shm]") {
  const auto layout = two_group_layout();
  for (uint32_t group = 0; group < 2; ++group) {
    CAPTURE(group);
    auto pool = BlockPoolSegment::create(layout, pool_options(group, 6, /*generation=*/2, /*pool=*/group + 1));
    REQUIRE(pool.ok());
    const peer::PoolName named{pool->pool_id(), pool->pool_generation()};
    auto written = peer::write_seeded(*pool, named, kRows, /*seed=*/1000 + group);
    REQUIRE(written.ok());

    const PeerResult read = run_peer(peer_args("read", *pool, PoolGeneration{2}, kRows));
    INFO(read.errors);
    REQUIRE(read.exit_code == 0);
    CHECK(read.output == written->hex());

    // A peer holding the old generation is refused, and says why.
    const PeerResult stale = run_peer(peer_args("read", *pool, PoolGeneration{1}, kRows));
    CHECK(stale.exit_code == 3);
    CHECK(stale.output.empty());
    CHECK(stale.errors.find("stale_generation") != std::string::npos);
  }
}

TEST_CASE("this process reads exactly the rows a second process wrote", "[shm]") {
  const auto layout = two_group_layout();
  for (uint32_t group = 0; group < 2; ++group) {
    CAPTURE(group);
    auto pool = BlockPoolSegment::create(layout, pool_options(group, 6, /*generation=*/2, /*pool=*/group + 1));
    REQUIRE(pool.ok());
    const uint64_t seed = 2000 + group;
    auto args = peer_args("write", *pool, PoolGeneration{2}, kRows);
    args.push_back(std::to_string(seed));
    const PeerResult wrote = run_peer(args);
    INFO(wrote.errors);
    REQUIRE(wrote.exit_code == 0);

    const peer::PoolName named{pool->pool_id(), pool->pool_generation()};
    auto read = peer::read_selected(std::as_const(*pool), named, kRows);
    REQUIRE(read.ok());
    CHECK(sha256(*read).hex() == wrote.output);
    // Byte for byte: the seeded stream the peer used, regenerated here.
    CHECK(*read == peer::seeded_bytes(seed, read->size()));
    // Rows outside the selection are untouched (still the zeros of a fresh pool).
    auto untouched = peer::read_selected(std::as_const(*pool), named, {{4, 0, 3}, {4, 11, 16}, {2, 0, 16}});
    REQUIRE(untouched.ok());
    CHECK(*untouched == std::string(untouched->size(), '\0'));
  }
}
