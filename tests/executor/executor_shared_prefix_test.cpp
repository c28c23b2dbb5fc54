// [executor] shared-prefix execution (spec 0x0BA-0x0BE, 0x0BI): Hydragen and
// ChunkAttention against the monolithic FP64 row, and their ledgers computed
// from the snapshot against the spec's worked numbers.
#include <catch2/catch.hpp>

#include "services/common/units.hpp"
#include "services/executor/chunk_attention.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/reference_attention.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "tests/support/executor_fixture.hpp"
#include "tests/support/shared_prefix_tree_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

template <class T>
std::vector<T> run_schedule(bool hydragen, const PagedKvView& view, const ExecutionSnapshot& s,
                            const std::vector<double>& q64, ThreadPool* pool, std::vector<T>* lse_out = nullptr,
                            SharedPrefixReceipt* receipt = nullptr) {
  const uint64_t rows = s.sequences.size() * s.contract.heads.q_heads;
  std::vector<T> q(q64.begin(), q64.end()), out = poisoned<T>(rows * view.v.head_dim), lse = poisoned<T>(rows);
  SharedPrefixArgsT<T> args{&s, s.fence(), s.contract.heads, q, out, lse};
  auto r = hydragen ? hydragen_attention(view, args, pool) : chunk_attention(view, args, pool);
  if (!r.ok()) FAIL(r.error().describe());
  if (receipt != nullptr) *receipt = *r;
  if (lse_out != nullptr) *lse_out = lse;
  return out;
}

}  // namespace

TEST_CASE("0x0BE: Hydragen and ChunkAttention reproduce the monolithic rows of the four-sequence tree",
          "[executor][shared_prefix]") {
  FourSequenceTree tree;
  const ExecutionSnapshot& s = tree.snapshot;
  REQUIRE(s.validate().ok());
  // Coverage intervals, as the tree diagram states them.
  const std::vector<std::pair<uint32_t, uint32_t>> coverage{{0, 4}, {0, 2}, {2, 4}, {0, 1}, {1, 2}, {2, 3}, {3, 4}};
  for (uint32_t c = 0; c < 7; ++c) {
    CHECK(s.chunks[c].coverage_begin == coverage[c].first);
    CHECK(s.chunks[c].coverage_end == coverage[c].second);
  }
  const PagedKvView view = tree.pool.view();
  std::mt19937_64 rng(0x0BE0);
  const auto q64 = widened(random_values<double>(4 * 2, rng, 2.0));
  std::vector<double> want(4 * 3), want_lse(4);
  reference_snapshot(view, s, q64, want, want_lse);
  ThreadPool pool(2);
  for (const bool hydragen : {true, false}) {
    INFO((hydragen ? "Hydragen" : "ChunkAttention"));
    std::vector<double> lse;
    const auto got = run_schedule<double>(hydragen, view, s, q64, &pool, &lse);
    // Binary64: agreement at rounding level (the spec's oracle saw 2.3e-16).
    CHECK(max_abs_error<double>(got, want) <= 1e-12);
    CHECK(max_abs_error<double>(lse, want_lse) <= 1e-12);
    const auto got32 = run_schedule<float>(hydragen, view, s, q64, &pool);
    CHECK(max_row_relative_error<float>(got32, want, 3) <= 1e-5);
  }
}

TEST_CASE("0x0BE: the work and payload ledgers are computed from the snapshot", "[executor][shared_prefix]") {
  FourSequenceTree tree;
  const ExecutionSnapshot& s = tree.snapshot;
  // Toy widths of the spec: one K/V row = (d_qk + d_v) * 2 B = 10 B; partial
  // outputs of 2 B per lane, max and sum of 4 B each; tau = 1.
  const SharedPrefixLedger ledger = shared_prefix_ledger(s, LedgerWidths{10, 2, 4});
  CHECK(ledger.logical_pairs == 19);
  CHECK(ledger.unique_rows == 10);
  CHECK(ledger.saved_reads == 9);
  CHECK(ledger.baseline_kv_bytes == 190);
  CHECK(ledger.shared_kv_bytes == 100);
  CHECK(ledger.partial_rows == 8);  // coverage(C0) + coverage(C1) + coverage(C2) = 4 + 2 + 2
  CHECK(ledger.partial_row_bytes == 14);
  CHECK(ledger.partial_bytes == 112);
  // Brute force: the monolithic reference's key lists, summed.
  uint64_t pairs = 0;
  for (uint32_t q = 0; q < 4; ++q) pairs += path_keys(s, q).size();
  CHECK(pairs == ledger.logical_pairs);
  // ChunkAttention's chunk-first metadata materialises exactly those rows.
  const ChunkFirstMetadata md = build_chunk_first_metadata(s);
  CHECK(md.chunk == std::vector<uint32_t>{0, 1, 2});
  CHECK(md.begins == std::vector<uint32_t>{0, 0, 2});
  CHECK(md.ends == std::vector<uint32_t>{4, 2, 4});
  CHECK(md.offsets == std::vector<uint64_t>{0, 4, 6});
  CHECK(md.partial_rows == 8);
  SharedPrefixReceipt receipt;
  std::mt19937_64 rng(1);
  const auto q64 = widened(random_values<double>(8, rng));
  run_schedule<double>(false, tree.pool.view(), s, q64, nullptr, nullptr, &receipt);
  CHECK(receipt.partial_states == 8);  // x H_q = 1
  CHECK(receipt.batched_chunks == 3);
  CHECK(receipt.snapshot_digest == s.digest());
}

TEST_CASE("0x0BI: shared work is invariant in P_c, traversal is not", "[executor][shared_prefix]") {
  const std::vector<uint32_t> suffixes{8, 8, 8, 8, 16, 16, 16, 16};
  // Row payload 512 B; partial output 128 FP16 lanes; normaliser two FP32.
  const LedgerWidths widths{512, 2, 4};
  for (uint32_t chunk : {4u, 8u, 16u, 32u, 64u, 128u}) {
    INFO("P_c " << chunk);
    SharedPrefixShape shape;
    shape.prefix_tokens = 64;
    shape.suffix_tokens = suffixes;
    shape.chunk_tokens = chunk;
    shape.block_tokens = 4;
    shape.contract = ExecutionContract{HeadMapping{1, 1}, 64, 128, ScalarType::fp16, ScalarType::fp16, 1};
    auto w = build_shared_prefix_workload(shape);
    REQUIRE(w.ok());
    const ExecutionSnapshot& s = w->snapshot;
    const SharedPrefixLedger l = shared_prefix_ledger(s, widths);
    CHECK(l.logical_pairs == 608);  // 8*64 + 96
    CHECK(l.unique_rows == 160);    // 64 + 96
    CHECK(l.saved_reads == 448);    // (B - 1) S
    CHECK(l.baseline_kv_bytes == 304 * kKiB);
    CHECK(l.shared_kv_bytes == 80 * kKiB);
    CHECK(l.baseline_kv_bytes - l.shared_kv_bytes == 224 * kKiB);
    // 0x0BI's closed forms for traversal and partial state.
    uint64_t ordinary = 0, shared = ceil_div(64, chunk);
    for (uint32_t u : suffixes) {
      ordinary += ceil_div(64 + u, chunk);
      shared += ceil_div(u, chunk);
    }
    CHECK(ordinary_chunk_visits(s, chunk) == ordinary);
    CHECK(l.chunks == shared);
    CHECK(l.partial_rows == 8 * ceil_div(64, chunk));
    CHECK(l.partial_row_bytes == 128 * 2 + 2 * 4);
    CHECK(l.partial_bytes == 8 * ceil_div(64, chunk) * 264);
  }
  // The worked P_c = 16 counts, spelled out: 4*ceil(72/16) + 4*ceil(80/16) = 40
  // ordinary visits; 4 + 4*1 + 4*1 = 12 shared chunks; 32 partial rows.
  SharedPrefixShape shape;
  shape.prefix_tokens = 64;
  shape.suffix_tokens = suffixes;
  shape.chunk_tokens = 16;
  shape.contract = ExecutionContract{HeadMapping{1, 1}, 64, 128, ScalarType::fp16, ScalarType::fp16, 1};
  const auto w = build_shared_prefix_workload(shape);
  REQUIRE(w.ok());
  CHECK(ordinary_chunk_visits(w->snapshot, 16) == 40);
  CHECK(shared_prefix_ledger(w->snapshot, widths).chunks == 12);
  CHECK(shared_prefix_ledger(w->snapshot, widths).partial_rows == 32);
}

TEST_CASE("0x0BI workload: both designs and ordinary paged decode agree numerically", "[executor][shared_prefix]") {
  std::mt19937_64 rng(0x0B1);
  ThreadPool pool(3);
  for (uint32_t chunk : {16u, 32u, 64u}) {
    INFO("P_c " << chunk);
    SharedPrefixShape shape;
    shape.prefix_tokens = 64;
    shape.suffix_tokens = {8, 8, 8, 8, 16, 16, 16, 16};
    shape.chunk_tokens = chunk;
    shape.block_tokens = 8;
    shape.contract = ExecutionContract{HeadMapping{8, 2}, 32, 24, ScalarType::bf16, ScalarType::fp16, 1};
    auto w = build_shared_prefix_workload(shape);
    REQUIRE(w.ok());
    PlainPool pp(PlainPoolShape{w->slot_count, 8, 2, 32, 24, ScalarType::bf16, ScalarType::fp16});
    for (const auto& c : w->snapshot.chunks)
      for (const auto& r : c.runs) pp.fill_block(r.slot, r.rows, rng);
    const PagedKvView view = pp.view();
    const auto q64 = widened(random_values<float>(8 * 8 * 32, rng, 2.0));
    std::vector<double> want(8 * 8 * 24);
    reference_snapshot(view, w->snapshot, q64, want, {});
    for (const bool hydragen : {true, false}) {
      INFO((hydragen ? "Hydragen" : "ChunkAttention"));
      CHECK(max_row_relative_error<double>(run_schedule<double>(hydragen, view, w->snapshot, q64, &pool), want, 24) <=
            1e-12);
      CHECK(max_row_relative_error<float>(run_schedule<float>(hydragen, view, w->snapshot, q64, &pool), want, 24) <=
            1e-5);
    }
    // Storage reuse without execution reuse: the same blocks through block tables.
    REQUIRE(w->table_slots.size() == 8);
    const auto tables = w->tables();
    std::vector<float> q(q64.begin(), q64.end()), out = poisoned<float>(want.size());
    REQUIRE(paged_decode(view, DecodeArgs{HeadMapping{8, 2}, tables, q, out, {}, {}}, &pool).ok());
    CHECK(max_row_relative_error<float>(out, want, 24) <= 1e-5);
  }
}

}  // namespace kvrt::test
