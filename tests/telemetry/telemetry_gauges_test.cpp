// Reconciliation gauges of spec 0x0CF: the pool partition
//   N_pool = N_free + N_evictable + N_live + N_reserved-or-copying,
// the refcount delta recorded - derived, and the mapping lag
//   L_map = max(0, f_required - f_ready).
#include <catch2/catch.hpp>

#include "services/allocator/allocator_observation.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/telemetry/reconciliation_gauges.hpp"

using namespace kvrt;

namespace {

BlockObservation block(uint32_t id, ObservedBlockState s, uint32_t refs) {
  return BlockObservation{PhysicalBlockId{id}, s, refs};
}

}  // namespace

TEST_CASE("the 0x0CF gauge fixture: 12 = 3 + 2 + 5 + 2 and 9 - 9 = 0", "[telemetry][gauges]") {
  // A hand-built snapshot, block by block (the spec lists only the totals):
  // three requests map the five live blocks, two leases pin two of them, two
  // blocks are destinations of an unpublished COW (reserved, then copying).
  //   request R1: 500 501 502     request R2: 500 501 503     request R3: 504
  //   leases:     502 (a reader), 504 (a COW source)
  PoolObservation pool;
  pool.pool = PoolId{1};
  pool.capacity_blocks = 12;
  pool.blocks = {
      block(500, ObservedBlockState::live, 2),      block(501, ObservedBlockState::live, 2),
      block(502, ObservedBlockState::live, 2),      block(503, ObservedBlockState::live, 1),
      block(504, ObservedBlockState::live, 2),      block(505, ObservedBlockState::evictable, 0),
      block(506, ObservedBlockState::evictable, 0), block(507, ObservedBlockState::reserved, 0),
      block(508, ObservedBlockState::copying, 0),   block(509, ObservedBlockState::free, 0),
      block(510, ObservedBlockState::free, 0),      block(511, ObservedBlockState::free, 0),
  };
  for (uint32_t id : {500, 501, 502, 500, 501, 503, 504}) pool.request_map_refs.push_back(PhysicalBlockId{id});
  for (uint32_t id : {502, 504}) pool.lease_refs.push_back(PhysicalBlockId{id});

  auto p = pool_partition(pool);
  REQUIRE(p.ok());
  CHECK(*p == PoolPartition{12, 3, 2, 5, 2});
  CHECK(p->pool == p->free + p->evictable + p->live + p->reserved_or_copying);
  auto r = reconcile_refcounts(pool);
  REQUIRE(r.ok());
  CHECK(r->recorded == 9);
  CHECK(r->derived == 9);
  CHECK(r->delta == 0);
  CHECK(r->blocks_with_drift == 0);

  // A leaked reference: the metadata says 3 on block 503, the maps say 1.
  pool.blocks[3].recorded_refcount = 3;
  r = reconcile_refcounts(pool);
  REQUIRE(r.ok());
  CHECK(r->delta == 2);
  CHECK(r->blocks_with_drift == 1);
  // +1 on one block and -1 on another: the total hides it, the drift count does not.
  pool.blocks[3].recorded_refcount = 2;
  pool.blocks[4].recorded_refcount = 1;
  r = reconcile_refcounts(pool);
  CHECK(r->delta == 0);
  CHECK(r->blocks_with_drift == 2);
}

TEST_CASE("partial or overlapping observations cannot satisfy the partition", "[telemetry][gauges]") {
  PoolObservation pool;
  pool.capacity_blocks = 3;
  pool.blocks = {block(1, ObservedBlockState::free, 0), block(2, ObservedBlockState::live, 1)};
  CHECK(pool_partition(pool).error().field == "capacity_blocks");
  pool.blocks.push_back(block(2, ObservedBlockState::free, 0));  // one block in two states
  CHECK(pool_partition(pool).error().code == ErrorCode::ledger_identity_broken);
  pool.blocks.back().block = PhysicalBlockId{3};
  pool.request_map_refs = {PhysicalBlockId{9}};
  CHECK(reconcile_refcounts(pool).error().field == "request_map_refs[0]");
}

TEST_CASE("gauges read from a committed allocator reconcile", "[telemetry][gauges][allocator]") {
  // Ten blocks of four tokens, one cache group. D caches two blocks and
  // leaves (2 evictable); A takes three, B forks A (three more references),
  // C takes two, and a reader leases one of A's blocks: 5 live blocks, 9
  // references, 3 free blocks.
  BlockAllocatorConfig config;
  config.block_size = 4;
  config.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{1}, 10, 500, 64, {}});
  auto created = BlockAllocator::create(config);
  REQUIRE(created.ok());
  BlockAllocator al = std::move(created).value();
  Result<AllocationReceipt> r = al.allocate(AllocateArgs{8, {}, {}});
  REQUIRE(r.ok());
  const RequestId d = r->request_id;
  REQUIRE(al.commit_rows(CommitRowsArgs{al.fence(d).value(), 8}).ok());  // D wrote its 8 rows
  const auto d_table = al.table(d, 0).value();
  for (size_t j = 0; j < d_table.size(); ++j) REQUIRE(al.publish_cache_key(d_table[j], CacheKey{0x700 + j}).ok());
  REQUIRE(al.release(ReleaseArgs{al.fence(d).value(), ReleaseReason::finished}).ok());
  r = al.allocate(AllocateArgs{12, {}, {}});
  REQUIRE(r.ok());
  const RequestId a = r->request_id;
  r = al.fork(ForkArgs{al.fence(a).value()});
  REQUIRE(r.ok());
  const RequestId b = r->request_id;
  r = al.allocate(AllocateArgs{8, {}, {}});
  REQUIRE(r.ok());
  const RequestId c = r->request_id;
  auto lease = al.acquire_lease(al.table(a, 0).value()[1]);
  REQUIRE(lease.ok());
  REQUIRE(al.validate().ok());

  const std::vector<RequestId> open{a, b, c};
  const std::vector<BlockLease> leases{*lease};
  auto obs = observe_allocator_pool(al, 0, open, leases);
  REQUIRE(obs.ok());
  auto p = pool_partition(*obs);
  REQUIRE(p.ok());
  CHECK(*p == PoolPartition{10, 3, 2, 5, 0});
  const auto counts = al.counts(0);  // the allocator's own incremental counters agree
  CHECK(p->free == counts.free);
  CHECK(p->evictable == counts.evictable);
  CHECK(p->live == counts.live);
  auto ref = reconcile_refcounts(*obs);
  REQUIRE(ref.ok());
  CHECK(ref->recorded == 9);
  CHECK(ref->derived == 9);
  CHECK(ref->delta == 0);

  // An observer that forgets request B sees a delta of +3: B's three references.
  const std::vector<RequestId> forgot{a, c};
  auto partial = observe_allocator_pool(al, 0, forgot, leases);
  REQUIRE(partial.ok());
  CHECK(reconcile_refcounts(*partial)->delta == 3);
  CHECK(observe_allocator_pool(al, 1, open, leases).error().code == ErrorCode::unknown_group);
}

TEST_CASE("mapping lag is directional", "[telemetry][gauges]") {
  CHECK(mapping_lag(32, 32) == 0);  // the 0x0CF checked path
  CHECK(mapping_lag(32, 16) == 16);
  CHECK(mapping_lag(16, 32) == 0);  // mapped ahead is not negative lag
}
