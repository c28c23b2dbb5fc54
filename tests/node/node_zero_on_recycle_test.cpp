// [node][isolation] Zero-on-recycle on a running node ([node]
// zero_on_recycle): a tenant's worker fills every block of a small pool with
// a recognisable pattern through the pools it mapped, and releases; a worker
// of another tenant then allocates, and reads its block through its own
// mapping. With the option every byte it sees is zero; without it (the
// default, for a single trust domain) it sees the pattern, which is what
// the option exists to prevent.
#include "engine/session_pools.hpp"
#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {

TEST_CASE("node zero_on_recycle: another tenant's recycled block reads zero", "[node][isolation]") {
  const bool zero = GENERATE(true, false);
  INFO("zero_on_recycle = " << zero);
  ScratchDir dir("node-zero");
  constexpr uint32_t kBlocks = 4;
  InProcessNode n(dir, test_node_config(dir,
                                        "blocks_per_group = " + std::to_string(kBlocks) +
                                            "\nzero_on_recycle = " + (zero ? "true" : "false") + "\n",
                                        {"blocks_per_group"}));
  CHECK(n.stat("allocator", "zero_on_recycle") == (zero ? 1 : 0));
  auto a = n.connect("worker-0");  // test/shared
  auto b = n.connect("worker-3");  // test/other
  Result<shm::ShmPayloadStore> a_pools = attach_shared_memory_pools(a->session());
  Result<shm::ShmPayloadStore> b_pools = attach_shared_memory_pools(b->session());
  REQUIRE(a_pools.ok());
  REQUIRE(b_pools.ok());
  const uint32_t P = 16;  // tests/data/node's layout

  // A takes every block of every pool and writes 0xAA into all of it.
  const AllocationReceipt all = allocation(*a, AllocateOp{kBlocks * P, {}, std::nullopt});
  REQUIRE(all.outcome == AllocationOutcome::committed);
  REQUIRE(all.published_entries.size() == kBlocks * a_pools->group_count());
  for (const TableEntryUpdate& e : all.published_entries) {
    uint32_t g = 0;
    while (a->session().pools.at(g).group != e.handle.group) ++g;
    const uint32_t slot = e.handle.block.value;  // the node's pools use block id == slot
    a_pools->write_rows(g, slot, 0, P, std::vector<uint8_t>(P * a_pools->row_bytes(g), 0xAA));
  }
  const RequestFence fence{all.request_id, all.request_generation, all.table_version_after};
  const AllocationReceipt committed = allocation(*a, CommitRowsOp{fence, kBlocks * P});
  REQUIRE(committed.outcome == AllocationOutcome::committed);
  Result<AllocatorBatchReceipt> released =
      a->call(AllocatorBatch{{},
                             {ReleaseOp{RequestFence{fence.request, fence.generation, committed.table_version_after},
                                        ReleaseReason::finished}}});
  REQUIRE(released.ok());
  REQUIRE(std::holds_alternative<ReleaseResult>(released->outcomes.at(0)));

  // B's allocation can only get one of those blocks.
  const AllocationReceipt mine = allocation(*b, AllocateOp{5, {}, std::nullopt});
  REQUIRE(mine.outcome == AllocationOutcome::committed);
  REQUIRE_FALSE(mine.published_entries.empty());
  for (const TableEntryUpdate& e : mine.published_entries) {
    uint32_t g = 0;
    while (b->session().pools.at(g).group != e.handle.group) ++g;
    std::vector<uint8_t> seen(P * b_pools->row_bytes(g));
    b_pools->read_rows(g, e.handle.block.value, 0, P, seen);
    const auto pattern = static_cast<size_t>(std::count(seen.begin(), seen.end(), uint8_t{0xAA}));
    const auto zeros = static_cast<size_t>(std::count(seen.begin(), seen.end(), uint8_t{0}));
    if (zero) {
      CHECK(zeros == seen.size());
    } else {
      CHECK(pattern == seen.size());
    }
  }
}

}  // namespace kvrt::test
