// The allocator's worked traces: the 0x05B two-group COW trace with its
// injected failure (0x04F), the 0x05E truncate / reuse / release / touch /
// evict sequence with the 0x05F stale writer, and the COW cost ledgers of
// 0x05A and 0x09C. Every figure is read from receipts and state, and compared
// with the spec's arithmetic written out here.
#include <catch2/catch.hpp>

#include "services/allocator/block_allocator.hpp"
#include "tests/support/allocator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// Loop 5 fixture: g0 rows 48 KiB, g1 rows 16 KiB (0x04E), P = 16, block ids
// 1000+ / 2000+, a 4-block pool per group, generations chosen so that the
// blocks the trace names carry the spec's generations when first allocated
// (1002@9, 2002@12, 1003@12, 2003@6), and epoch 41 so that A's two
// pool-changing transactions bring it to 43.
BlockAllocatorConfig loop5_config() {
  BlockAllocatorConfig c;
  c.block_size = 16;
  c.initial_epoch = 41;
  c.groups.push_back(
      GroupPoolConfig{CacheGroupId{0}, PoolId{10}, PoolGeneration{1}, 4, 1000, 48 * 1024, {1, 1, 8, 11}});
  c.groups.push_back(
      GroupPoolConfig{CacheGroupId{1}, PoolId{11}, PoolGeneration{7}, 4, 2000, 16 * 1024, {1, 1, 11, 5}});
  return c;
}

std::string hg(const PhysicalBlockHandle& h) {
  return std::to_string(h.block.value) + "@" + std::to_string(h.generation.value);
}

struct Loop5 {
  HostPayloadStore store{{48 * 1024, 16 * 1024}, 4, 16};
  BlockAllocator alloc = BlockAllocator::create(loop5_config(), &store).value();
  RowWriter rows{{48 * 1024, 16 * 1024}};
  RequestFence a;

  // A: 30 prompt rows committed, then tokens 30, 31, 32 appended with rows:
  // context 33, table version 5, tail 1002@9 / 2002@12 with one valid row.
  Loop5() {
    Result<AllocationReceipt> r = alloc.allocate(AllocateArgs{30, {}, {}});
    REQUIRE(r.ok());
    a = alloc.fence(r->request_id).value();
    r = alloc.commit_rows(CommitRowsArgs{a, 30});
    REQUIRE(r.ok());
    for (uint32_t t = 30; t < 33; ++t) {
      a = alloc.fence(a.request).value();
      r = alloc.append(AppendArgs{a, rows.rows_for(1, t), {}});
      REQUIRE(r.ok());
    }
    a = alloc.fence(a.request).value();
    REQUIRE(alloc.validate().ok());
  }
};

}  // namespace

TEST_CASE("0x05B: private append, fork and a two-group copy-on-write", "[allocator][trace]") {
  Loop5 f;
  BlockAllocator& al = f.alloc;
  REQUIRE(f.a.table_version.value == 5);
  REQUIRE(al.context_tokens(f.a.request).value() == 33);
  REQUIRE(al.epoch().value == 43);
  auto tail0 = al.table(f.a.request, 0).value().back();
  auto tail1 = al.table(f.a.request, 1).value().back();
  CHECK(hg(tail0) == "1002@9");
  CHECK(hg(tail1) == "2002@12");
  CHECK(al.block(tail0).value().valid_rows == 1);
  CHECK(al.block(tail0).value().refcount == 1);

  // A appends privately at token 33: write offset 1, publish context 34,
  // table version 6, tail rows 2; the epoch does not move.
  Result<AllocationReceipt> r = al.append(AppendArgs{f.a, f.rows.rows_for(1, 33), {}});
  REQUIRE(r.ok());
  CHECK(r->append_path == AppendPath::private_tail);
  CHECK(r->context_tokens_after == 34);
  CHECK(r->table_version_after.value == 6);
  CHECK(al.block(tail0).value().valid_rows == 2);
  CHECK(r->allocator_epoch_after.value == 43);
  CHECK(r->new_physical_blocks == 0);
  CHECK(r->copied_rows == 0);
  REQUIRE(al.validate().ok());

  // Fork A to D: every mapped handle gains one strong reference.
  const RequestFence a6 = al.fence(f.a.request).value();
  r = al.fork(ForkArgs{a6});
  REQUIRE(r.ok());
  const RequestFence d1 = al.fence(r->request_id).value();
  CHECK(d1.table_version.value == 1);
  CHECK(al.block(tail0).value().refcount == 2);
  CHECK(al.block(tail1).value().refcount == 2);
  CHECK(r->refcount_deltas.size() == 6);  // 3 blocks x 2 groups, 1 -> 2
  for (const auto& d : r->refcount_deltas) CHECK((int64_t(d.refs_after) - int64_t(d.refs_before)) == 1);
  CHECK(r->allocator_epoch_after.value == 43);
  REQUIRE(al.validate().ok());

  SECTION("injected failure after reserving group 0 restores the predecessor digest (0x04F)") {
    const StateDigest before = al.state_digest();
    al.faults().arm("after_reserve_group_0");
    r = al.append(AppendArgs{d1, f.rows.rows_for(2, 34), {}});
    REQUIRE(r.ok());
    CHECK(r->outcome == AllocationOutcome::rolled_back);
    CHECK(r->rollback_reason == "fault point after_reserve_group_0");
    CHECK(r->predecessor_digest == before);
    CHECK(r->successor_digest == before);
    CHECK(al.state_digest() == before);
    CHECK(al.epoch().value == 43);
    CHECK(al.fence(d1.request).value().table_version.value == 1);  // nothing published
    REQUIRE(al.validate().ok());
  }

  SECTION("D's append at token 34 copies the shared tail bundle") {
    r = al.append(AppendArgs{d1, f.rows.rows_for(2, 34), {}});
    REQUIRE(r.ok());
    CHECK(r->outcome == AllocationOutcome::committed);
    CHECK(r->append_path == AppendPath::copy_on_write);
    auto d_tail0 = al.table(d1.request, 0).value().back();
    auto d_tail1 = al.table(d1.request, 1).value().back();
    CHECK(hg(d_tail0) == "1003@12");
    CHECK(hg(d_tail1) == "2003@6");
    CHECK(al.block(d_tail0).value().valid_rows == 3);
    CHECK(al.block(d_tail0).value().refcount == 1);
    CHECK(al.block(tail0).value().refcount == 1);  // old tail refs 2 -> 1
    CHECK(al.block(tail1).value().refcount == 1);
    CHECK(r->copied_rows == 2);
    CHECK(r->context_tokens_after == 35);
    CHECK(r->table_version_after.value == 2);
    CHECK(r->predecessor_digest != r->successor_digest);
    CHECK(r->allocator_epoch_after.value == 44);
    // 0x05A: copy payload r * 64 KiB = 128 KiB; traffic 2*128 + 64 = 320 KiB;
    // amplification 2r + 1 = 5; new capacity P * 64 KiB = 1 MiB across groups.
    const uint64_t row = 64 * 1024;
    CHECK(r->copy_payload_bytes == 2 * row);
    CHECK(2 * r->copy_payload_bytes + row == 320 * 1024);
    CHECK((2 * r->copy_payload_bytes + row) / row == 5);
    CHECK(r->new_physical_blocks == 2);
    CHECK(uint64_t{r->new_physical_blocks} / 2 * 16 * row == 1024 * 1024);
    // The copied rows are the predecessor's bytes; row 2 is D's own.
    CHECK(f.rows.matches(f.store, 0, 3, 0, 2, 1, 32));
    CHECK(f.rows.matches(f.store, 0, 3, 2, 1, 2, 34));
    CHECK(f.rows.matches(f.store, 1, 3, 0, 2, 1, 32));
    REQUIRE(al.validate().ok());
  }
}

TEST_CASE("0x05E/0x05F: truncate, reuse with new generations, release, touch, evict", "[allocator][trace]") {
  Loop5 f;
  BlockAllocator& al = f.alloc;
  Result<AllocationReceipt> r = al.append(AppendArgs{f.a, f.rows.rows_for(1, 33), {}});
  REQUIRE(r.ok());
  r = al.fork(ForkArgs{al.fence(f.a.request).value()});
  REQUIRE(r.ok());
  const RequestId d = r->request_id;
  r = al.append(AppendArgs{al.fence(d).value(), f.rows.rows_for(2, 34), {}});
  REQUIRE(r.ok());
  const PhysicalBlockHandle d_tail0 = al.table(d, 0).value().back();
  const PhysicalBlockHandle d_tail1 = al.table(d, 1).value().back();
  const RequestFence stale_d = al.fence(d).value();

  // truncate(D, 32): only D's suffix bundle goes; its refs reach zero and
  // 1003@12 / 2003@6 return to the free queues.
  Result<ReleaseResult> rr = al.truncate(TruncateArgs{stale_d, 32, 35});
  REQUIRE(rr.ok());
  CHECK(rr->reason == ReleaseReason::truncated);
  CHECK(rr->context_tokens_after == 32);
  REQUIRE(rr->freed_handles.size() == 2);
  CHECK(hg(rr->freed_handles[0]) == "1003@12");
  CHECK(hg(rr->freed_handles[1]) == "2003@6");
  CHECK(al.counts(0).free == 1);
  REQUIRE(al.validate().ok());

  // allocate(F, 16) reuses those ids with generations 13 and 7.
  r = al.allocate(AllocateArgs{16, {}, {}});
  REQUIRE(r.ok());
  const RequestId fr = r->request_id;
  CHECK(hg(al.table(fr, 0).value()[0]) == "1003@13");
  CHECK(hg(al.table(fr, 1).value()[0]) == "2003@7");
  // The stale D writer holding @12 / @6 is rejected (ABA, 0x05F) ...
  auto stale = al.acquire_lease(d_tail0);
  REQUIRE(!stale.ok());
  CHECK(stale.error().code == ErrorCode::stale_physical);
  CHECK(al.acquire_lease(d_tail1).error().code == ErrorCode::stale_physical);
  // ... and so is its pre-truncate table version.
  CHECK(al.append(AppendArgs{stale_d, {}, {}}).error().code == ErrorCode::stale_table_version);
  REQUIRE(al.validate().ok());

  // Publish cache identities on A's two full bundles, then release A and
  // cancel D: the full cached blocks become EVICTABLE, the uncached tail FREE.
  auto a_t0 = al.table(f.a.request, 0).value();
  auto a_t1 = al.table(f.a.request, 1).value();
  for (int j = 0; j < 2; ++j) {
    r = al.publish_cache_key(a_t0[j], CacheKey{0x100u + j});
    REQUIRE(r.ok());
    r = al.publish_cache_key(a_t1[j], CacheKey{0x200u + j});
    REQUIRE(r.ok());
  }
  rr = al.release(ReleaseArgs{al.fence(f.a.request).value(), ReleaseReason::finished});
  REQUIRE(rr.ok());
  CHECK(rr->reason == ReleaseReason::finished);
  CHECK(al.block(a_t0[0]).value().refcount == 1);  // D still maps blocks 0 and 1
  CHECK(rr->freed_handles.size() == 2);            // A's tail bundle 1002 / 2002
  rr = al.release(ReleaseArgs{al.fence(d).value(), ReleaseReason::cancelled});
  REQUIRE(rr.ok());
  CHECK(rr->reason == ReleaseReason::cancelled);
  CHECK(rr->evictable_handles.size() == 4);
  CHECK(rr->freed_handles.empty());
  CHECK(al.counts(0).evictable == 2);
  CHECK(al.block(a_t0[0]).value().state == BlockState::evictable);
  REQUIRE(al.validate().ok());

  // touch(G, cached block 0): the zero-ref cached bundle leaves the
  // evictable queue and G's map publishes it.
  const PhysicalBlockHandle bundle0[2] = {a_t0[0], a_t1[0]};
  r = al.allocate(AllocateArgs{16, bundle0, {}});
  REQUIRE(r.ok());
  const RequestId g = r->request_id;
  CHECK(r->useful_new_rows == 0);
  CHECK(r->new_physical_blocks == 0);
  CHECK(al.block(a_t0[0]).value().state == BlockState::live);
  CHECK(al.block(a_t0[0]).value().refcount == 1);
  CHECK(al.counts(0).evictable == 1);
  REQUIRE(al.validate().ok());

  // evict(cached block 1): the weak identity goes, the block turns FREE.
  r = al.evict(a_t0[1]);
  REQUIRE(r.ok());
  CHECK(al.block(a_t0[1]).value().state == BlockState::free);
  CHECK(al.block(a_t0[1]).value().cache_key == kNoCacheKey);
  // Evicting block 0's identity does not revoke G's live mapping.
  r = al.evict(a_t0[0]);
  REQUIRE(r.ok());
  CHECK(al.block(a_t0[0]).value().state == BlockState::live);
  CHECK(al.table(g, 0).value()[0] == a_t0[0]);
  auto events = al.drain_events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].cache_key == CacheKey{0x101});
  CHECK(events[1].cache_key == CacheKey{0x100});
  REQUIRE(al.validate().ok());
}

TEST_CASE("0x09C: COW cost over allocator block sizes for a 20-token shared prefix", "[allocator][trace]") {
  // r = 20 mod P_a; copy traffic 2 r B_row; destination capacity P_a B_row;
  // amplification P_a / r (0x09C), with B_row = 64 KiB.
  const uint64_t row = 64 * 1024;
  for (uint32_t p : {4u, 8u, 16u, 32u, 64u}) {
    INFO("P_a = " << p);
    BlockAllocatorConfig c;
    c.block_size = p;
    c.groups.push_back(GroupPoolConfig{CacheGroupId{0}, PoolId{1}, PoolGeneration{1}, 16, 0, 48 * 1024, {}});
    c.groups.push_back(GroupPoolConfig{CacheGroupId{1}, PoolId{2}, PoolGeneration{1}, 16, 0, 16 * 1024, {}});
    HostPayloadStore store({48 * 1024, 16 * 1024}, 16, p);
    BlockAllocator al = BlockAllocator::create(c, &store).value();
    RowWriter rows{{48 * 1024, 16 * 1024}};
    Result<AllocationReceipt> r = al.allocate(AllocateArgs{20, {}, {}});
    REQUIRE(r.ok());
    const RequestId a = r->request_id;
    r = al.commit_rows(CommitRowsArgs{al.fence(a).value(), 20});
    REQUIRE(r.ok());
    r = al.fork(ForkArgs{al.fence(a).value()});
    REQUIRE(r.ok());
    const RequestId b = r->request_id;
    r = al.append(AppendArgs{al.fence(b).value(), rows.rows_for(9, 20), {}});
    REQUIRE(r.ok());
    const uint32_t expected_r = 20 % p;
    CHECK(r->copied_rows == expected_r);
    CHECK(2 * r->copy_payload_bytes == 2 * expected_r * row);
    CHECK(r->append_path == (expected_r == 0 ? AppendPath::new_bundle : AppendPath::copy_on_write));
    CHECK(uint64_t{r->new_physical_blocks} / 2 * p * row == p * row);  // M_dst
    if (expected_r != 0) CHECK(double(p) / r->copied_rows == Approx(double(p) / (20 % p)));
    REQUIRE(al.validate().ok());
  }
}
