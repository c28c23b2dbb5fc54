// Two processes share a pool (one allocates and writes rows
// through the pool, the other attaches by name and reads exactly those bytes).
// The peer is a separate executable (kvrt_shm_peer) started with posix_spawn,
// so it shares nothing with this process but the segment's name and a few
// numbers on its command line; it answers with a SHA-256 on a pipe.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/shm/shm_peer_protocol.hpp"
#include "tests/support/peer_process.hpp"
#include "tests/support/shm_test_fixture.hpp"

extern char** environ;

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

using kvrt::test::PeerResult;

PeerResult run_peer(const std::vector<std::string>& args) { return kvrt::test::run_peer_program(KVRT_SHM_PEER, args); }

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
