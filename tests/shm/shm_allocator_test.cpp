// The allocator over shared-memory pools: BlockAllocator moves K/V
// bytes through a ShmPayloadStore, and the bytes are where the pools' declared
// axis orders say. Every row is checked twice against the seeded row the test
// wrote: through ShmPayloadStore::read_rows, and rebuilt scalar by scalar from
// BlockPoolSegment::byte_offset (tests/shm_allocator_fixture.hpp). The
// copy-on-write of 0x05C must copy the source's real bytes, and the same trace
// on a HostPayloadStore must hold the same canonical rows and reach the same
// state digest.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <set>

#include "services/allocator/block_allocator.hpp"
#include "tests/shm/shm_allocator_fixture.hpp"

using namespace kvrt;
using namespace kvrt::shm;
using namespace kvrt::shm::test;

namespace {

constexpr uint32_t kP = 16;  // P_a of two-group-tp2 [tokens / block]

uint32_t group_index_of(const BlockAllocatorConfig& config, const PhysicalBlockHandle& h) {
  for (uint32_t g = 0; g < config.groups.size(); ++g)
    if (config.groups[g].group == h.group) return g;
  FAIL("handle of no configured group");
  return 0;
}

// Which lineage wrote a request's token (seeded_row's first argument).
using LineageOf = std::function<uint64_t(uint32_t token)>;

struct Trace {
  RequestFence a, d;
  AllocationReceipt cow;                            // D's copy-on-write append of token 45
  std::vector<PhysicalBlockHandle> a_tail, d_tail;  // per group, after the trace
};

// A: 20 prompt rows, written in one write_rows per block at the slots the
// allocate receipt names, then committed; tokens 20..44 appended with rows
// (t = 32 opens a new bundle). Fork D at context 45; D appends token 45 under
// lineage 2: its tail (offset 13) is shared, so the bundle is copied (13 rows)
// first. A then appends token 45 under lineage 1 into its now private tail.
Trace run_trace(BlockAllocator& al, BlockPayloadStore& store, const BlockAllocatorConfig& config,
                const std::vector<uint64_t>& row_bytes) {
  kvrt::test::RowWriter rows(row_bytes);
  Trace t;
  Result<AllocationReceipt> r = al.allocate(AllocateArgs{20, {}, {}});
  REQUIRE(r.ok());
  REQUIRE(r->outcome == AllocationOutcome::committed);
  for (const TableEntryUpdate& e : r->published_entries) {
    const uint32_t g = group_index_of(config, e.handle);
    const uint32_t first = e.logical_block * kP, n = std::min(kP, 20 - first);
    std::vector<uint8_t> block_rows;
    for (uint32_t i = 0; i < n; ++i) {
      const auto row = seeded_row(row_bytes[g], 1, first + i, g);
      block_rows.insert(block_rows.end(), row.begin(), row.end());
    }
    store.write_rows(g, slot_of(config, e.handle), 0, n, block_rows);
  }
  t.a = al.fence(r->request_id).value();
  r = al.commit_rows(CommitRowsArgs{t.a, 20});
  REQUIRE(r.ok());
  for (uint32_t token = 20; token < 45; ++token) {
    t.a = al.fence(t.a.request).value();
    r = al.append(AppendArgs{t.a, rows.rows_for(1, token), {}});
    REQUIRE(r.ok());
    CHECK(r->append_path == (token == 32 ? AppendPath::new_bundle : AppendPath::private_tail));
  }
  t.a = al.fence(t.a.request).value();
  r = al.fork(ForkArgs{t.a});
  REQUIRE(r.ok());
  t.d = al.fence(r->request_id).value();
  Result<AllocationReceipt> cow = al.append(AppendArgs{t.d, rows.rows_for(2, 45), {}});
  REQUIRE(cow.ok());
  t.cow = std::move(cow).value();
  r = al.append(AppendArgs{t.a, rows.rows_for(1, 45), {}});
  REQUIRE(r.ok());
  CHECK(r->append_path == AppendPath::private_tail);
  t.a = al.fence(t.a.request).value();
  t.d = al.fence(t.d.request).value();
  for (uint32_t g = 0; g < config.groups.size(); ++g) {
    t.a_tail.push_back(al.table(t.a.request, g).value().back());
    t.d_tail.push_back(al.table(t.d.request, g).value().back());
  }
  REQUIRE(al.validate().ok());
  return t;
}

// Every valid row of a request, through the store (one read per block) and
// scalar by scalar through the pool's byte offsets, against the seeded rows.
void check_request_rows(const BlockAllocator& al, const ShmPayloadStore& store, const BlockAllocatorConfig& config,
                        const CacheLayoutManifest& layout, RequestId request, uint32_t tokens,
                        const LineageOf& lineage) {
  for (uint32_t g = 0; g < store.group_count(); ++g) {
    const uint64_t B = store.row_bytes(g);
    const auto table = al.table(request, g).value();
    REQUIRE(table.size() == (tokens + kP - 1) / kP);
    for (uint32_t j = 0; j < table.size(); ++j) {
      const uint32_t slot = slot_of(config, table[j]), n = std::min(kP, tokens - j * kP);
      CAPTURE(g, j, slot);
      CHECK(al.block(table[j]).value().valid_rows == n);
      std::vector<uint8_t> got(n * B);
      store.read_rows(g, slot, 0, n, got);
      for (uint32_t i = 0; i < n; ++i) {
        CAPTURE(i);
        const uint32_t token = j * kP + i;
        const auto want = seeded_row(B, lineage(token), token, g);
        const bool through_store = std::equal(want.begin(), want.end(), got.begin() + i * B);
        CHECK(through_store);
        const bool by_elements =
            row_by_elements(store.segment(g), store.block_ref(g, slot), i, layout.cache_groups[g]) == want;
        CHECK(by_elements);
      }
    }
  }
}

std::vector<uint8_t> read_block_rows(const BlockPayloadStore& store, uint32_t g, uint32_t slot, uint32_t first,
                                     uint32_t n, uint64_t row_bytes) {
  std::vector<uint8_t> out(n * row_bytes);
  store.read_rows(g, slot, first, n, out);
  return out;
}

}  // namespace

TEST_CASE("allocate, append, fork and copy-on-write land on the pools' real bytes", "[shm][allocator]") {
  const auto layout = two_group_layout();
  const auto B = layout_row_bytes(layout);
  REQUIRE(B == std::vector<uint64_t>{48 * 1024, 16 * 1024});  // 0x02A for two-group-tp2
  auto pools = SharedBlockPools::create(layout, shared_options(/*blocks=*/8));
  REQUIRE(pools.ok());
  BlockAllocator& al = pools->allocator();
  ShmPayloadStore& store = pools->store();
  const Trace t = run_trace(al, store, pools->config(), B);

  // 0x05A's COW ledger: r = 13 rows copied of both groups, r * B_row,rank
  // with B_row,rank = 48 + 16 KiB; new capacity one bundle.
  CHECK(t.cow.append_path == AppendPath::copy_on_write);
  CHECK(t.cow.copied_rows == 13);
  CHECK(t.cow.copy_payload_bytes == 13 * 64 * 1024);
  CHECK(t.cow.new_physical_blocks == 2);

  const auto a_lineage = [](uint32_t) -> uint64_t { return 1; };
  const auto d_lineage = [](uint32_t token) -> uint64_t { return token == 45 ? 2 : 1; };
  check_request_rows(al, store, pools->config(), layout, t.a.request, 46, a_lineage);
  check_request_rows(al, store, pools->config(), layout, t.d.request, 46, d_lineage);

  // The COW destination's first 13 rows are the source's rows byte for byte,
  // in another slot of the same pool; row 13 is each request's own token 45.
  for (uint32_t g = 0; g < 2; ++g) {
    CAPTURE(g);
    const uint32_t src = slot_of(pools->config(), t.a_tail[g]), dst = slot_of(pools->config(), t.d_tail[g]);
    CHECK(src != dst);
    CHECK(al.block(t.a_tail[g]).value().refcount == 1);
    const bool copied = read_block_rows(store, g, dst, 0, 13, B[g]) == read_block_rows(store, g, src, 0, 13, B[g]);
    CHECK(copied);
    const bool own_rows = read_block_rows(store, g, dst, 13, 1, B[g]) == seeded_row(B[g], 2, 45, g) &&
                          read_block_rows(store, g, src, 13, 1, B[g]) == seeded_row(B[g], 1, 45, g);
    CHECK(own_rows);
    // Rows past the frontier of the fresh destination were never written.
    CHECK(read_block_rows(store, g, dst, 14, 2, B[g]) == std::vector<uint8_t>(2 * B[g], 0));
  }

  // The same trace on a process-local store: the same canonical rows and the
  // same committed state, so both stores mean the same bytes by a row.
  HostPayloadStore host(B, 8, kP);
  BlockAllocator host_al = BlockAllocator::create(pools->config(), &host).value();
  const Trace h = run_trace(host_al, host, pools->config(), B);
  CHECK(host_al.state_digest() == al.state_digest());
  for (const RequestId request : {t.a.request, t.d.request})
    for (uint32_t g = 0; g < 2; ++g) {
      const std::vector<PhysicalBlockHandle> table = al.table(request, g).value();
      for (const PhysicalBlockHandle& handle : table) {
        const uint32_t slot = slot_of(pools->config(), handle);
        const bool same = read_block_rows(host, g, slot, 0, kP, B[g]) == read_block_rows(store, g, slot, 0, kP, B[g]);
        CHECK(same);
      }
    }
  CHECK(h.d_tail == t.d_tail);
}

TEST_CASE("rows keep the canonical order under any declared axis order", "[shm][allocator]") {
  auto layout = two_group_layout();
  using A = TensorAxis;
  // g0: heads and lanes outside layers and the slot, so no two canonical
  // scalars are adjacent (the store gathers scalar by scalar); g1: token
  // outermost, so one token's K (or V) row is a single run.
  layout.cache_groups[0].axis_order = {A::token_offset, A::head_dim, A::physical_slot, A::kv_head, A::layer_local};
  layout.cache_groups[1].axis_order = {A::token_offset, A::physical_slot, A::layer_local, A::kv_head, A::head_dim};
  REQUIRE(layout.validate().ok());
  auto pools = SharedBlockPools::create(layout, shared_options(/*blocks=*/3));
  REQUIRE(pools.ok());
  ShmPayloadStore& store = pools->store();
  for (uint32_t g = 0; g < 2; ++g) {
    CAPTURE(g);
    const uint64_t B = store.row_bytes(g);
    REQUIRE(B == layout.cache_groups[g].row_bytes());
    // Rows [2, 9) of slot 1 hold tokens 100..106 of lineage 5, in one call.
    std::vector<uint8_t> written;
    for (uint32_t i = 0; i < 7; ++i) {
      const auto row = seeded_row(B, 5, 100 + i, g);
      written.insert(written.end(), row.begin(), row.end());
    }
    store.write_rows(g, 1, 2, 7, written);
    CHECK(read_block_rows(store, g, 1, 2, 7, B) == written);
    for (uint32_t i = 0; i < 7; ++i) {
      const bool by_elements = row_by_elements(store.segment(g), store.block_ref(g, 1), 2 + i,
                                               layout.cache_groups[g]) == seeded_row(B, 5, 100 + i, g);
      CHECK(by_elements);
    }
    // copy_rows moves rows [0, 9) of slot 1 to slot 2, K and V, real bytes.
    store.copy_rows(g, 1, 2, 9);
    CHECK(read_block_rows(store, g, 2, 0, 9, B) == read_block_rows(store, g, 1, 0, 9, B));
    CHECK(read_block_rows(store, g, 2, 9, 7, B) == std::vector<uint8_t>(7 * B, 0));
    // zero_block clears one block and nothing else.
    store.zero_block(g, 1);
    CHECK(block_is_zero(store.segment(g), store.block_ref(g, 1)));
    CHECK_FALSE(block_is_zero(store.segment(g), store.block_ref(g, 2)));
    CHECK(read_block_rows(store, g, 2, 2, 7, B) == written);
  }
}

// write_rows and read_rows move each run of a row as one rectangle over the
// rows (PoolRowPlan::for_each_row_rect). Under every order of the five axes,
// a random row range of a random block lands scalar by scalar where the
// pool's byte offsets say, reads back whole, and leaves every other row of
// the pool as it was.
TEST_CASE("row ranges land where byte offsets say under every axis order (seeded)", "[shm][allocator]") {
  constexpr uint64_t kSeed = 0x03E5EED;
  std::mt19937_64 rng(kSeed);
  std::array<TensorAxis, kTensorAxisCount> order = {TensorAxis::layer_local, TensorAxis::physical_slot,
                                                    TensorAxis::token_offset, TensorAxis::kv_head,
                                                    TensorAxis::head_dim};
  std::sort(order.begin(), order.end());
  uint32_t orders = 0;
  do {
    auto layout = two_group_layout();
    for (auto& group : layout.cache_groups) group.axis_order.assign(order.begin(), order.end());
    if (!layout.validate().ok()) continue;
    ++orders;
    auto pools = SharedBlockPools::create(layout, shared_options(/*blocks=*/3));
    REQUIRE(pools.ok());
    ShmPayloadStore& store = pools->store();
    for (uint32_t g = 0; g < 2; ++g) {
      const uint64_t B = store.row_bytes(g);
      const uint32_t slot = static_cast<uint32_t>(rng() % 3);
      const uint32_t first = static_cast<uint32_t>(rng() % kP);
      const uint32_t rows = 1 + static_cast<uint32_t>(rng() % (kP - first));
      INFO("seed " << kSeed << " order " << orders << " group " << g << " slot " << slot << " rows [" << first << ", "
                   << first + rows << ")");
      std::vector<std::vector<uint8_t>> before;
      for (uint32_t s = 0; s < 3; ++s) before.push_back(read_block_rows(store, g, s, 0, kP, B));
      std::vector<uint8_t> written;
      for (uint32_t i = 0; i < rows; ++i) {
        const auto row = seeded_row(B, orders, first + i, g);
        written.insert(written.end(), row.begin(), row.end());
      }
      store.write_rows(g, slot, first, rows, written);
      CHECK(read_block_rows(store, g, slot, first, rows, B) == written);
      for (uint32_t i = 0; i < rows; ++i) {
        const bool by_elements = row_by_elements(store.segment(g), store.block_ref(g, slot), first + i,
                                                 layout.cache_groups[g]) == seeded_row(B, orders, first + i, g);
        CHECK(by_elements);
      }
      for (uint32_t s = 0; s < 3; ++s) {
        std::vector<uint8_t> after = read_block_rows(store, g, s, 0, kP, B);
        if (s == slot)
          std::copy(before[s].begin() + first * B, before[s].begin() + (first + rows) * B, after.begin() + first * B);
        CHECK(after == before[s]);
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
  // The manifest accepts any order of the five axes (0x03E).
  CHECK(orders == 120);
}

TEST_CASE("zero-on-recycle clears a recycled block's bytes and its old handle goes stale", "[shm][allocator]") {
  const auto layout = two_group_layout();
  auto options = shared_options(/*blocks=*/1);
  options.zero_on_recycle = true;
  auto pools = SharedBlockPools::create(layout, options);
  REQUIRE(pools.ok());
  BlockAllocator& al = pools->allocator();
  ShmPayloadStore& store = pools->store();

  Result<AllocationReceipt> r = al.allocate(AllocateArgs{kP, {}, {}});
  REQUIRE(r.ok());
  std::vector<PhysicalBlockHandle> old_handles;
  for (const TableEntryUpdate& e : r->published_entries) {
    const uint32_t g = group_index_of(pools->config(), e.handle);
    std::vector<uint8_t> rows;
    for (uint32_t i = 0; i < kP; ++i) {
      const auto row = seeded_row(store.row_bytes(g), 3, i, g);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    store.write_rows(g, slot_of(pools->config(), e.handle), 0, kP, rows);
    CHECK_FALSE(block_is_zero(store.segment(g), store.block_ref(g, 0)));
    old_handles.push_back(e.handle);
  }
  const RequestFence a = al.fence(r->request_id).value();
  r = al.commit_rows(CommitRowsArgs{a, kP});
  REQUIRE(r.ok());
  const Result<ReleaseResult> released = al.release(ReleaseArgs{al.fence(a.request).value(), ReleaseReason::finished});
  REQUIRE(released.ok());

  // One block per pool: the next request must get the same slot, recycled.
  r = al.allocate(AllocateArgs{5, {}, {}});
  REQUIRE(r.ok());
  REQUIRE(r->outcome == AllocationOutcome::committed);
  for (const TableEntryUpdate& e : r->published_entries) {
    const uint32_t g = group_index_of(pools->config(), e.handle);
    CAPTURE(g);
    CHECK(e.handle.block == old_handles[g].block);
    CHECK(e.handle.generation.value == old_handles[g].generation.value + 1);
    CHECK(block_is_zero(store.segment(g), store.block_ref(g, 0)));
    auto located = pools->locate(e.handle);
    REQUIRE(located.ok());
    CHECK(located->group_index == g);
    CHECK(located->ref.pool == PoolId{20 + g});
    CHECK(located->ref.generation == PoolGeneration{1});
    CHECK(located->ref.block == PhysicalSlot{0});
    // The pre-recycle handle names the same block id under its old
    // generation: refused (0x05F), never resolved to the new owner's bytes.
    auto stale = pools->locate(old_handles[g]);
    REQUIRE_FALSE(stale.ok());
    CHECK(stale.error().code == ErrorCode::stale_physical);
  }
  REQUIRE(al.validate().ok());
}

TEST_CASE("zero-on-recycle: no path that hands out a block shows its old owner's bytes", "[shm][allocator]") {
  // Every free block holds 0xAA, as a released tenant's K/V would. Each path
  // that hands out a block (allocate, append into a new bundle,
  // copy-on-write) must show the new owner only the rows it wrote or copied;
  // every other row reads zero. Fork hands out none: the child names its
  // parent's blocks.
  const auto layout = two_group_layout();
  auto options = shared_options(/*blocks=*/3);
  options.zero_on_recycle = true;
  auto pools = SharedBlockPools::create(layout, options);
  REQUIRE(pools.ok());
  BlockAllocator& al = pools->allocator();
  ShmPayloadStore& store = pools->store();
  const uint32_t G = 2;
  // Slots the live requests hold, from their receipts: every other slot is
  // free, and gets the old tenant's bytes.
  std::set<std::pair<uint32_t, uint32_t>> held;
  auto hold = [&](const AllocationReceipt& r) {
    for (const TableEntryUpdate& e : r.published_entries)
      held.emplace(group_index_of(pools->config(), e.handle), slot_of(pools->config(), e.handle));
  };
  auto poison_free = [&] {
    for (uint32_t g = 0; g < G; ++g)
      for (uint32_t slot = 0; slot < 3; ++slot)
        if (!held.contains({g, slot}))
          store.write_rows(g, slot, 0, kP, std::vector<uint8_t>(kP * store.row_bytes(g), 0xAA));
  };
  auto zero_rows = [&](uint32_t g, uint32_t slot, uint32_t first, uint32_t n) {
    return read_block_rows(store, g, slot, first, n, store.row_bytes(g)) ==
           std::vector<uint8_t>(n * store.row_bytes(g), 0);
  };
  auto fence = [&](RequestId id) { return al.fence(id).value(); };
  auto write_prompt = [&](const AllocationReceipt& r, uint32_t rows, uint64_t lineage) {
    for (const TableEntryUpdate& e : r.published_entries) {
      const uint32_t g = group_index_of(pools->config(), e.handle);
      std::vector<uint8_t> bytes;
      for (uint32_t i = 0; i < rows; ++i) {
        const auto row = seeded_row(store.row_bytes(g), lineage, i, g);
        bytes.insert(bytes.end(), row.begin(), row.end());
      }
      store.write_rows(g, slot_of(pools->config(), e.handle), 0, rows, bytes);
    }
  };

  // Allocate: 5 prompt rows written, rows [5, P) never written.
  poison_free();
  Result<AllocationReceipt> b = al.allocate(AllocateArgs{5, {}, {}});
  REQUIRE(b.ok());
  REQUIRE(b->outcome == AllocationOutcome::committed);
  write_prompt(*b, 5, 1);
  hold(*b);
  for (const TableEntryUpdate& e : b->published_entries)
    CHECK(zero_rows(group_index_of(pools->config(), e.handle), slot_of(pools->config(), e.handle), 5, kP - 5));
  REQUIRE(al.commit_rows(CommitRowsArgs{fence(b->request_id), 5}).ok());

  // Copy-on-write: a fork shares the partial tail; the child's append
  // copies rows [0, 5), writes row 5, and rows [6, P) of its new block
  // must be zero, not the recycled block's 0xAA.
  Result<AllocationReceipt> forked = al.fork(ForkArgs{fence(b->request_id)});
  REQUIRE(forked.ok());
  REQUIRE(forked->outcome == AllocationOutcome::committed);
  CHECK(forked->new_physical_blocks == 0);  // fork hands out no block
  const RequestId child = forked->request_id;
  poison_free();
  std::vector<std::vector<uint8_t>> appended(G);
  std::vector<std::span<const uint8_t>> rows(G);
  for (uint32_t g = 0; g < G; ++g) {
    appended[g] = seeded_row(store.row_bytes(g), 2, 5, g);
    rows[g] = appended[g];
  }
  Result<AllocationReceipt> cow = al.append(AppendArgs{fence(child), rows, {}});
  REQUIRE(cow.ok());
  REQUIRE(cow->outcome == AllocationOutcome::committed);
  REQUIRE(cow->append_path == AppendPath::copy_on_write);
  hold(*cow);
  for (const TableEntryUpdate& e : cow->published_entries) {
    const uint32_t g = group_index_of(pools->config(), e.handle);
    const uint32_t slot = slot_of(pools->config(), e.handle);
    CAPTURE(g);
    for (uint32_t i = 0; i < 5; ++i)
      CHECK(read_block_rows(store, g, slot, i, 1, store.row_bytes(g)) == seeded_row(store.row_bytes(g), 1, i, g));
    CHECK(read_block_rows(store, g, slot, 5, 1, store.row_bytes(g)) == appended[g]);
    CHECK(zero_rows(g, slot, 6, kP - 6));
  }

  // Append into a new bundle: the parent's block is full (P rows), its next
  // row opens a block whose rows [1, P) must be zero.
  for (uint32_t i = 5; i < kP; ++i) {
    std::vector<std::vector<uint8_t>> row(G);
    std::vector<std::span<const uint8_t>> spans(G);
    for (uint32_t g = 0; g < G; ++g) {
      row[g] = seeded_row(store.row_bytes(g), 1, i, g);
      spans[g] = row[g];
    }
    Result<AllocationReceipt> tail = al.append(AppendArgs{fence(b->request_id), spans, {}});
    REQUIRE(tail.ok());
    REQUIRE(tail->append_path == AppendPath::private_tail);
  }
  poison_free();
  for (uint32_t g = 0; g < G; ++g) {
    appended[g] = seeded_row(store.row_bytes(g), 1, kP, g);
    rows[g] = appended[g];
  }
  Result<AllocationReceipt> fresh = al.append(AppendArgs{fence(b->request_id), rows, {}});
  REQUIRE(fresh.ok());
  REQUIRE(fresh->outcome == AllocationOutcome::committed);
  REQUIRE(fresh->append_path == AppendPath::new_bundle);
  for (const TableEntryUpdate& e : fresh->published_entries) {
    const uint32_t g = group_index_of(pools->config(), e.handle);
    const uint32_t slot = slot_of(pools->config(), e.handle);
    CAPTURE(g);
    CHECK(read_block_rows(store, g, slot, 0, 1, store.row_bytes(g)) == appended[g]);
    CHECK(zero_rows(g, slot, 1, kP - 1));
  }
  REQUIRE(al.validate().ok());
}

TEST_CASE("the pools factory and the store refuse what does not match, leaving nothing behind", "[shm][allocator]") {
  const auto layout = two_group_layout();

  SECTION("the allocator config names the pools the options describe") {
    auto options = shared_options(4, /*pool_generation=*/6);
    auto config = shared_pools_allocator_config(layout, options);
    REQUIRE(config.ok());
    REQUIRE(config->groups.size() == 2);
    CHECK(config->block_size == 16);
    for (uint32_t g = 0; g < 2; ++g) {
      CHECK(config->groups[g].group == layout.cache_groups[g].group_id);
      CHECK(config->groups[g].pool == PoolId{20 + g});
      CHECK(config->groups[g].pool_generation == PoolGeneration{6});
      CHECK(config->groups[g].capacity_blocks == 4);
      CHECK(config->groups[g].block_id_base == 1000 * (g + 1));
    }
    CHECK(config->groups[0].row_bytes == 48 * 1024);
    CHECK(config->groups[1].row_bytes == 16 * 1024);
    // A byte budget buys whole 1 MiB bundles (16 * 64 KiB, 0x03B).
    options.capacity = PoolCapacity::bytes(3 * 1024 * 1024 + 5);
    CHECK(shared_pools_allocator_config(layout, options)->groups[1].capacity_blocks == 3);
    options.block_id_bases = {1000};
    auto bad = shared_pools_allocator_config(layout, options);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == ErrorCode::config_field);
    CHECK(bad.error().field == "block_id_bases");
  }

  SECTION("check_config and check_rows name the field that differs") {
    auto pools = SharedBlockPools::create(layout, shared_options(4));
    REQUIRE(pools.ok());
    const ShmPayloadStore& store = pools->store();
    CHECK(store.check_config(pools->config()).ok());
    const auto field_of = [&](const std::function<void(BlockAllocatorConfig&)>& mutate) {
      BlockAllocatorConfig c = pools->config();
      mutate(c);
      const Status s = store.check_config(c);
      REQUIRE_FALSE(s.ok());
      CHECK(s.error().code == ErrorCode::config_field);
      return s.error().field;
    };
    CHECK(field_of([](auto& c) { c.groups[1].pool_generation = PoolGeneration{2}; }) == "groups[1].pool_generation");
    CHECK(field_of([](auto& c) { c.groups[0].row_bytes = 16 * 1024; }) == "groups[0].row_bytes");
    CHECK(field_of([](auto& c) { c.groups[1].pool = PoolId{20}; }) == "groups[1].pool");
    CHECK(field_of([](auto& c) { c.groups[0].capacity_blocks = 5; }) == "groups[0].capacity_blocks");
    CHECK(field_of([](auto& c) { c.block_size = 32; }) == "block_size");
    CHECK(field_of([](auto& c) { c.groups.pop_back(); }) == "groups");

    CHECK(store.check_rows(1, 3, 10, 6).ok());
    CHECK(store.check_rows(2, 0, 0, 1).error().field == "group_index");
    CHECK(store.check_rows(0, 4, 0, 1).error().field == "slot");
    CHECK(store.check_rows(0, 3, 10, 7).error().field == "row_range");
    CHECK(store.check_rows(0, 3, 10, 7).error().code == ErrorCode::coordinate_out_of_range);
  }

  SECTION("a store needs pools that agree on block size and capacity") {
    auto none = ShmPayloadStore::create({});
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().field == "segments");
    std::vector<BlockPoolSegment> segments;
    segments.push_back(BlockPoolSegment::create(layout, pool_options(0, 4, 1, 1)).value());
    segments.push_back(BlockPoolSegment::create(layout, pool_options(1, 5, 1, 2)).value());
    const std::string first = segments[0].name();
    auto mixed = ShmPayloadStore::create(std::move(segments));
    REQUIRE_FALSE(mixed.ok());
    CHECK(mixed.error().code == ErrorCode::incompatible);
    CHECK(mixed.error().field == "segments[1].capacity_blocks");
    CHECK_FALSE(segment_exists(first));  // the refused segments were owned, and are gone
  }

  SECTION("a live segment at one group's name fails the whole creation and removes the rest") {
    const auto options = shared_options(2);
    PoolSegmentOptions squatter;
    squatter.name =
        PoolSegmentName{options.namespace_name, options.namespace_generation, CacheGroupId{1}, options.instance};
    squatter.pool_id = PoolId{99};
    squatter.pool_generation = PoolGeneration{1};
    squatter.capacity = PoolCapacity::blocks(2);
    auto held = BlockPoolSegment::create(layout, squatter);
    REQUIRE(held.ok());
    auto group0 = squatter;
    group0.name.group = CacheGroupId{0};
    auto pools = SharedBlockPools::create(layout, options);
    REQUIRE_FALSE(pools.ok());
    CHECK(pools.error().code == ErrorCode::segment_in_use);
    CHECK_FALSE(segment_exists(segment_name(group0)));
    CHECK(segment_exists(held->name()));
  }

  SECTION("moving the pools keeps the allocator's store; destroying them removes every name") {
    std::vector<std::string> names;
    {
      auto created = SharedBlockPools::create(layout, shared_options(2));
      REQUIRE(created.ok());
      SharedBlockPools pools = std::move(created).value();
      for (uint32_t g = 0; g < 2; ++g) names.push_back(pools.store().segment(g).name());
      Result<AllocationReceipt> r = pools.allocator().allocate(AllocateArgs{1, {}, {}});
      REQUIRE(r.ok());
      kvrt::test::RowWriter rows(layout_row_bytes(layout));
      const RequestFence f = pools.allocator().fence(r->request_id).value();
      r = pools.allocator().append(AppendArgs{f, rows.rows_for(9, 1), {}});
      REQUIRE(r.ok());
      const uint32_t slot = slot_of(pools.config(), r->published_entries[1].handle);
      CHECK(read_block_rows(pools.store(), 1, slot, 1, 1, 16 * 1024) == seeded_row(16 * 1024, 9, 1, 1));
      for (const auto& name : names) CHECK(segment_exists(name));
    }
    for (const auto& name : names) CHECK_FALSE(segment_exists(name));
  }
}
