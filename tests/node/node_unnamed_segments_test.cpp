// [node][isolation] Unnamed pool segments ([node] pool_segments = "unnamed"):
// the node's pools are memfds that never have a name, so a process of the
// node's uid that was not handed a descriptor has nothing to open; a worker
// session whose principal is allowed a namespace receives the descriptors
// over the session channel (the pool_descriptors route, SCM_RIGHTS) and
// shares the node's bytes exactly as with named segments. Admin sessions
// are refused, and a node whose segments have names says so.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>

#include "engine/session_pools.hpp"
#include "node/node_config.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {

namespace {

// Entries of /dev/shm whose name contains `instance`.
size_t shm_entries_of(const std::string& instance) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().find(instance) != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("node pool_segments = unnamed: no name in /dev/shm, descriptors to worker sessions only",
          "[node][isolation]") {
  ScratchDir dir("node-unnamed");
  InProcessNode n(dir, test_node_config(dir, "pool_segments = \"unnamed\"\n"));
  REQUIRE_FALSE(n.descriptor.pools.empty());
  for (const PoolAttachment& p : n.descriptor.pools) {
    CHECK(p.by_descriptor);
    CHECK(p.segment_name.empty());
  }
  // Nothing of this node is reachable by name, under any spelling.
  CHECK(shm_entries_of(n.descriptor.instance) == 0);

  auto a = n.connect("worker-0");  // test/shared
  auto b = n.connect("worker-1");  // test/shared
  REQUIRE(session_pools_by_descriptor(a->session()));
  // A receipt alone opens nothing: the pools have no name.
  Result<shm::ShmPayloadStore> by_receipt = attach_shared_memory_pools(a->session());
  REQUIRE_FALSE(by_receipt.ok());
  CHECK(by_receipt.error().code == ErrorCode::pool_fd_missing);

  Result<shm::ShmPayloadStore> a_pools = attach_shared_memory_pools(*a);
  Result<shm::ShmPayloadStore> b_pools = attach_shared_memory_pools(*b);
  INFO((a_pools.ok() ? std::string("ok") : a_pools.error().describe()));
  REQUIRE(a_pools.ok());
  REQUIRE(b_pools.ok());
  CHECK(n.stat("authorization", "pool_descriptors_served") == 2);

  // The descriptors are the node's sealed segments: no holder can resize them.
  Result<PoolDescriptors> handed = a->pool_descriptors();
  REQUIRE(handed.ok());
  REQUIRE(handed->descriptors.size() == n.descriptor.pools.size());
  for (size_t i = 0; i < handed->descriptors.size(); ++i) {
    CHECK(handed->pools[i].pool == n.descriptor.pools[i].pool);
    const int fd = handed->descriptors[i].get();
    CHECK((::fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW));
    CHECK(::ftruncate(fd, 4096) != 0);
  }

  // A's rows are B's rows: one set of bytes, shared through the descriptors.
  const uint32_t P = 16;  // tests/data/node's layout
  const AllocationReceipt mine = allocation(*a, AllocateOp{P, {}, std::nullopt});
  REQUIRE(mine.outcome == AllocationOutcome::committed);
  REQUIRE_FALSE(mine.published_entries.empty());
  for (const TableEntryUpdate& e : mine.published_entries) {
    uint32_t g = 0;
    while (a->session().pools.at(g).group != e.handle.group) ++g;
    std::vector<uint8_t> written(P * a_pools->row_bytes(g));
    for (size_t i = 0; i < written.size(); ++i) written[i] = static_cast<uint8_t>(i * 7 + g + 1);
    a_pools->write_rows(g, e.handle.block.value, 0, P, written);
    std::vector<uint8_t> seen(written.size());
    b_pools->read_rows(g, e.handle.block.value, 0, P, seen);
    CHECK(seen == written);
  }

  // An operator is never handed K/V.
  auto op = n.connect("operator");
  CHECK(op->session().pools.empty());
  Result<PoolDescriptors> refused = op->pool_descriptors();
  REQUIRE_FALSE(refused.ok());
  // The session actor refuses a worker route to an admin session before
  // the authorization owner hears of it.
  CHECK(refused.error().code == ErrorCode::authorization_route_denied);
}

TEST_CASE("node pool_segments = named: pool_descriptors says the pools have names", "[node][isolation]") {
  ScratchDir dir("node-named");
  InProcessNode n(dir, test_node_config(dir, ""));
  for (const PoolAttachment& p : n.descriptor.pools) {
    CHECK_FALSE(p.by_descriptor);
    CHECK_FALSE(p.segment_name.empty());
  }
  auto a = n.connect("worker-0");
  Result<PoolDescriptors> refused = a->pool_descriptors();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().field == "pool_segments");
  CHECK(n.stat("authorization", "pool_descriptors_refused") == 1);
  // The named path is unchanged.
  CHECK(attach_shared_memory_pools(*a).ok());
}

TEST_CASE("node config: pool_segments = unnamed needs the session channel", "[node][config]") {
  const std::string base = "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\n";
  Result<NodeConfig> ok = parse_node_config(base + "pool_segments = \"unnamed\"\n", "n.toml");
  REQUIRE(ok.ok());
  CHECK(ok->pool_segments == PoolSegments::unnamed);
  Result<NodeConfig> no_channel =
      parse_node_config(base + "pool_segments = \"unnamed\"\nsession_channel = false\n", "n.toml");
  REQUIRE_FALSE(no_channel.ok());
  CHECK(no_channel.error().field == "node.pool_segments");
  Result<NodeConfig> bad = parse_node_config(base + "pool_segments = \"hidden\"\n", "n.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().field == "node.pool_segments");
}

}  // namespace kvrt::test
