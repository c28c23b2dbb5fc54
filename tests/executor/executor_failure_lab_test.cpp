// [executor] the failure labs of spec 0x0BH and 0x0BN. Both tables were lost
// from the spec text; the cases are rebuilt from the contracts the
// surrounding sections state (0x0AC, 0x0BA, 0x0BB, 0x0BD, 0x0BI, 0x0BJ):
// every one must be a typed rejection before any read, with the caller's
// outputs left exactly as they were (still the NaN poison).
#include <catch2/catch.hpp>

#include "services/address/snapshot_loader.hpp"
#include "services/executor/chunk_attention.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/paged_prefill.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "services/identity/layout_loader.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

bool all_nan(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

// A small shared-prefix workload (B = 4, S = 32, U = [8, 8, 16, 4]) over a
// filled pool, for mutating one field at a time.
struct LabWorkload {
  SharedPrefixWorkload w;
  PlainPool pool;
  std::vector<float> q;
  explicit LabWorkload(SharedPrefixWorkload workload)
      : w(std::move(workload)), pool(PlainPoolShape{w.slot_count, 8, 2, 16, 16, ScalarType::fp32, ScalarType::fp32}) {
    std::mt19937_64 rng(0x0BB);
    for (const auto& c : w.snapshot.chunks)
      for (const auto& r : c.runs) pool.fill_block(r.slot, r.rows, rng);
    q = random_values<float>(4 * 4 * 16, rng);
  }
  static SharedPrefixWorkload build() {
    SharedPrefixShape s;
    s.prefix_tokens = 32;
    s.suffix_tokens = {8, 8, 16, 4};
    s.chunk_tokens = 16;
    s.block_tokens = 8;
    s.contract = ExecutionContract{HeadMapping{4, 2}, 16, 16, ScalarType::fp32, ScalarType::fp32, 1};
    s.tree_version = 41;
    return build_shared_prefix_workload(s).value();
  }
  LabWorkload() : LabWorkload(build()) {}

  // Runs both designs on `snapshot` with `fence` and `heads`; both must give
  // `code` naming `field` and leave the outputs untouched.
  void expect(const ExecutionSnapshot& snapshot, const SnapshotFence& fence, const HeadMapping& heads, ErrorCode code,
              const std::string& field) {
    for (const bool hydragen : {true, false}) {
      INFO((hydragen ? "Hydragen" : "ChunkAttention") << " expecting " << to_string(code) << " at " << field);
      std::vector<float> out = poisoned<float>(4 * 4 * 16);
      const SharedPrefixArgs args{&snapshot, fence, heads, q, out, {}};
      auto r = hydragen ? hydragen_attention(pool.view(), args) : chunk_attention(pool.view(), args);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == code);
      CHECK(r.error().field == field);
      CHECK(all_nan(out));
    }
  }
};

}  // namespace

TEST_CASE("failure lab 0x0BH: stale snapshots are refused", "[executor][failure_lab]") {
  LabWorkload lab;
  const ExecutionSnapshot& s = lab.w.snapshot;
  SnapshotFence older = s.fence();
  older.tree_version = 40;
  lab.expect(s, older, s.contract.heads, ErrorCode::executor_stale_snapshot, "tree_version");
  SnapshotFence other_tree = s.fence();
  other_tree.tree_state_digest = sha256(std::string("another tree state"));
  lab.expect(s, other_tree, s.contract.heads, ErrorCode::executor_stale_snapshot, "tree_state_digest");
  // The snapshot digest names every field: a receipt can tell two snapshots apart.
  ExecutionSnapshot reordered = s;
  std::swap(reordered.sequences[1], reordered.sequences[2]);
  CHECK(reordered.digest() != s.digest());
}

TEST_CASE("failure lab 0x0BH: coverage overlaps and gaps are refused", "[executor][failure_lab]") {
  LabWorkload lab;
  const ExecutionSnapshot& s = lab.w.snapshot;
  const HeadMapping heads = s.contract.heads;
  // Chunks: 0, 1 = prefix [0,16), [16,32) covering [0,4); then the private
  // suffix chunks 2 (seq 0), 3 (seq 1), 4 (seq 2), 5 (seq 3).
  REQUIRE(s.chunks.size() == 6);
  {  // a key position covered twice: sequence 0 reads the prefix's second chunk twice
    ExecutionSnapshot bad = s;
    bad.sequences[0].path = {0, 1, 1, 2};
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_overlap, "sequences[0].path[2]");
  }
  {  // positions [16, 32) covered by no chunk of sequence 1's path
    ExecutionSnapshot bad = s;
    bad.sequences[1].path = {0, 3};
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_gap, "sequences[1].path[1]");
  }
  {  // a coverage interval claiming a sequence whose path does not read the chunk
    ExecutionSnapshot bad = s;
    bad.chunks[2].coverage_end = 2;
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_overlap, "chunks[2].coverage");
  }
  {  // a coverage interval missing a sequence that reads the chunk
    ExecutionSnapshot bad = s;
    bad.chunks[0].coverage_end = 3;
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_gap, "chunks[0].coverage");
  }
  {  // sequences reordered without rebuilding the intervals (0x0BB)
    ExecutionSnapshot bad = s;
    std::swap(bad.sequences[1], bad.sequences[2]);
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_gap, "chunks[3].coverage");
    // Rebuilding the intervals makes the same order legal again.
    REQUIRE(bad.assign_coverage().ok());
    CHECK(bad.validate().ok());
  }
  {  // a path that stops short of its sequence's frontier
    ExecutionSnapshot bad = s;
    bad.sequences[3].context_tokens += 1;
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_coverage_gap, "sequences[3].path");
  }
  {  // a stale frontier: the path runs past what the sequence may see
    ExecutionSnapshot bad = s;
    bad.sequences[3].context_tokens -= 1;
    lab.expect(bad, bad.fence(), heads, ErrorCode::executor_frontier_mismatch, "sequences[3].context_tokens");
  }
}

TEST_CASE("failure lab 0x0BH: mismatched head mappings are refused", "[executor][failure_lab]") {
  LabWorkload lab;
  const ExecutionSnapshot& s = lab.w.snapshot;
  // Queries laid out for H_q = 8 against a snapshot contracting H_q = 4.
  lab.expect(s, s.fence(), HeadMapping{8, 2}, ErrorCode::executor_head_mapping, "contract.heads");
  // A contract whose K/V head count is not the pool's.
  ExecutionSnapshot bad = s;
  bad.contract.heads = HeadMapping{4, 4};
  lab.expect(bad, bad.fence(), HeadMapping{4, 4}, ErrorCode::executor_head_mapping, "contract.heads.kv_heads");
  // H_kv not dividing H_q.
  bad.contract.heads = HeadMapping{3, 2};
  lab.expect(bad, bad.fence(), HeadMapping{3, 2}, ErrorCode::executor_head_mapping, "contract.heads");
  // Widths: a contract of d_qk = 8 over a pool of 16 lanes.
  bad = s;
  bad.contract.qk_dim = 8;
  lab.expect(bad, bad.fence(), s.contract.heads, ErrorCode::executor_shape_mismatch, "contract.qk_dim");
}

TEST_CASE("failure lab 0x0BH: a chunk run past its block's committed rows reads padding", "[executor][failure_lab]") {
  LabWorkload lab;
  ExecutionSnapshot bad = lab.w.snapshot;
  // Sequence 3's private chunk holds 4 rows in a block with 4 committed rows;
  // claim a fifth.
  KvRowRun& run = bad.chunks[5].runs.back();
  REQUIRE(run.valid_rows == 4);
  run.rows = 5;
  bad.sequences[3].context_tokens += 1;
  lab.expect(bad, bad.fence(), bad.contract.heads, ErrorCode::row_not_valid, "chunks[5].runs[0]");
}

TEST_CASE("failure lab 0x0BN: granularity and traversal refusals of paged kernels", "[executor][failure_lab]") {
  std::mt19937_64 rng(0x0BF);
  const PlainPoolShape shape{0, 16, 2, 16, 16, ScalarType::fp32, ScalarType::fp32};
  PagedScenario sc = make_paged_scenario(shape, {40, 17}, rng, false);
  const PagedKvView view = sc.pool.view();
  const HeadMapping heads{4, 2};
  const auto q = random_values<float>(2 * 4 * 16, rng);
  auto decode = [&](const std::vector<DecodeRequest>& requests, const HeadMapping& h, AttentionOptions o,
                    const PagedKvView& v) {
    std::vector<float> out = poisoned<float>(requests.size() * h.q_heads * 16);
    auto r = paged_decode(
        v, DecodeArgs{h, requests, std::span<const float>(q.data(), requests.size() * h.q_heads * 16), out, {}, o});
    CHECK(all_nan(out));
    return r;
  };
  const auto requests = sc.decode_requests();
  auto expect = [](const Result<DecodeReceipt>& r, ErrorCode code, const std::string& field) {
    INFO("expecting " << to_string(code) << " at " << field);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    CHECK(r.error().field == field);
  };
  // P_k not dividing P_a (0x0AC): a kernel block of 6 over allocator blocks of 16.
  expect(decode(requests, heads, AttentionOptions{6, 0}, view), ErrorCode::kernel_block_not_divisor,
         "kernel_block_tokens");
  // A kernel block larger than the allocator block.
  expect(decode(requests, heads, AttentionOptions{32, 0}, view), ErrorCode::kernel_block_not_divisor,
         "kernel_block_tokens");
  // A split-K partition that is not a whole number of kernel blocks.
  expect(decode(requests, heads, AttentionOptions{8, 20}, view), ErrorCode::kernel_block_not_divisor,
         "options.partition_tokens");
  // Reading padding rows: request 0 sees 8 rows of its last block, which
  // commits only 7.
  sc.valid[0].back() = 7;
  expect(decode(sc.decode_requests(), heads, {}, view), ErrorCode::row_not_valid, "requests[0].table.valid_rows[2]");
  sc.valid[0].back() = 8;
  // A table shorter than ceil(T / P_a).
  sc.slots[1].pop_back();
  sc.valid[1].pop_back();
  expect(decode(sc.decode_requests(), heads, {}, view), ErrorCode::table_out_of_bounds, "requests[1].table.slots");
  sc = make_paged_scenario(shape, {40, 17}, rng, false);
  // A slot outside the pool.
  sc.slots[0][1] = 1000;
  expect(decode(sc.decode_requests(), heads, {}, sc.pool.view()), ErrorCode::coordinate_out_of_range,
         "requests[0].table.slots[1]");
  sc = make_paged_scenario(shape, {40, 17}, rng, false);
  // GQA mapping the pool cannot serve.
  expect(decode(sc.decode_requests(), HeadMapping{4, 4}, {}, sc.pool.view()), ErrorCode::executor_head_mapping,
         "heads.kv_heads");
  expect(decode(sc.decode_requests(), HeadMapping{3, 2}, {}, sc.pool.view()), ErrorCode::executor_head_mapping,
         "heads");
  // A request with nothing visible.
  sc.contexts[1] = 0;
  expect(decode(sc.decode_requests(), heads, {}, sc.pool.view()), ErrorCode::executor_frontier_mismatch,
         "requests[1].table.context_tokens");
  // Prefill: a suffix longer than its context.
  sc = make_paged_scenario(shape, {40, 17}, rng, false);
  const auto t = sc.decode_requests();
  const std::vector<PrefillRequest> prefill{{t[0].table, 41}};
  std::vector<float> pq(41 * 4 * 16), pout = poisoned<float>(41 * 4 * 16);
  auto p = paged_prefill(sc.pool.view(), PrefillArgs{heads, prefill, pq, pout, {}, 0, 0});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == ErrorCode::executor_frontier_mismatch);
  CHECK(all_nan(pout));
}

TEST_CASE("failure lab: buffers, dtypes and views are checked before any read", "[executor][failure_lab]") {
  std::mt19937_64 rng(0xB0F);
  const PlainPoolShape shape{0, 8, 1, 8, 8, ScalarType::fp32, ScalarType::fp32};
  const PagedScenario sc = make_paged_scenario(shape, {9}, rng, false);
  const auto requests = sc.decode_requests();
  std::vector<float> q(2 * 8), out = poisoned<float>(2 * 8), short_out = poisoned<float>(15), lse = poisoned<float>(3);
  auto r = paged_decode(sc.pool.view(), DecodeArgs{HeadMapping{2, 1}, requests, q, short_out, {}, {}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::executor_shape_mismatch);
  CHECK(r.error().field == "outputs");
  r = paged_decode(sc.pool.view(), DecodeArgs{HeadMapping{2, 1}, requests, q, out, lse, {}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().field == "lse");
  CHECK(all_nan(out));
  // fp8 storage needs a quantisation schema.
  std::vector<std::byte> bytes(4096);
  PlainPoolShape fp8 = shape;
  fp8.slot_count = 4;
  fp8.k_dtype = ScalarType::fp8_e4m3;
  auto v =
      plain_kv_view(fp8, KvTensorBytes{bytes.data(), bytes.size(), {}}, KvTensorBytes{bytes.data(), bytes.size(), {}});
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code == ErrorCode::executor_unsupported_dtype);
  CHECK(v.error().field == "k.dtype");
  // A view reaching past the bytes it was given.
  PlainPoolShape big = shape;
  big.slot_count = 1000;
  v = plain_kv_view(big, KvTensorBytes{bytes.data(), bytes.size(), {}}, KvTensorBytes{bytes.data(), bytes.size(), {}});
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code == ErrorCode::executor_view_out_of_bounds);
  CHECK(v.error().field == "k.bytes");
}

TEST_CASE("failure lab: block tables resolved from a TranslationSnapshot keep 0x03I's refusals",
          "[executor][failure_lab]") {
  auto layout = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/two-group-tp2.toml");
  REQUIRE(layout.ok());
  auto loaded =
      load_translation_snapshot(std::string(KVRT_SOURCE_DIR) + "/config/snapshots/loop4-fixture.toml", *layout);
  REQUIRE(loaded.ok());
  TranslationSnapshot s = *loaded;
  auto ok = resolve_block_table(s, "A", CacheGroupId{1});
  REQUIRE(ok.ok());
  CHECK(ok->slots == std::vector<uint32_t>{3, 6, 1});  // 2000, 2001, 2002 -> slots (0x03F: 2001 -> slot 6)
  CHECK(ok->valid_rows == std::vector<uint32_t>{16, 16, 1});
  CHECK(ok->context_tokens == 33);
  // A caller that planned against an older table version.
  auto stale = resolve_block_table(s, "C", CacheGroupId{0}, TableVersion{2});
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::stale_table_version);
  CHECK(resolve_block_table(s, "Z", CacheGroupId{0}).error().code == ErrorCode::unknown_request);
  // A descriptor of a recycled generation.
  for (auto& pool : s.pools)
    if (pool.group.value == 1)
      for (auto& d : pool.descriptors)
        if (d.physical_id.value == 2001) d.pool_generation = PoolGeneration{6};
  auto recycled = resolve_block_table(s, "A", CacheGroupId{1});
  REQUIRE_FALSE(recycled.ok());
  CHECK(recycled.error().code == ErrorCode::stale_physical);
  CHECK(recycled.error().field == "tables.blocks[1]");
}

}  // namespace kvrt::test
