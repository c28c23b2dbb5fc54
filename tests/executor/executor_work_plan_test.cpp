// [executor][work_plan] The host half of the CUDA attention launches
// (services/executor/attention_work_plan.hpp), checked without a GPU: an
// FP64 interpreter in this file executes a plan the way the device kernels
// do (each work item's partial over its keys, then the LSE merge of every
// sequence's merge list) and must reproduce the monolithic FP64 reference
// rows; the tiling property (each sequence's partials cover its path's keys
// exactly once, in order) is checked directly on random shapes.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "services/executor/attention_work_plan.hpp"
#include "services/executor/reference_attention.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "tests/support/executor_fixture.hpp"
#include "tests/support/shared_prefix_tree_fixture.hpp"

namespace kvrt::test {
namespace {

// Keys [key_begin, key_begin + count) of a plan chunk as pool locations.
std::vector<KeyLocation> item_keys(const AttentionWorkPlan& plan, uint32_t chunk, uint32_t key_begin, uint32_t count) {
  const PlanChunk& c = plan.chunks[chunk];
  std::vector<KeyLocation> keys;
  for (uint32_t k = key_begin; k < key_begin + count; ++k) {
    for (uint32_t r = c.run_begin; r < c.run_begin + c.run_count; ++r) {
      const PlanRowRun& run = plan.runs[r];
      if (k >= run.key_begin && k < run.key_begin + run.rows)
        keys.push_back({run.slot, run.first_row + (k - run.key_begin)});
    }
  }
  REQUIRE(keys.size() == count);  // every key in exactly one run
  return keys;
}

// Executes the plan in FP64: outputs [B][H_q][d_v], lse [B][H_q].
void interpret(const AttentionWorkPlan& plan, const PagedKvView& view, const HeadMapping& heads,
               const std::vector<double>& q, std::vector<double>& out, std::vector<double>& lse) {
  const uint32_t dq = view.k.head_dim, dv = view.v.head_dim;
  std::vector<double> po(uint64_t{plan.partial_count} * heads.q_heads * dv, std::nan(""));
  std::vector<double> pl(uint64_t{plan.partial_count} * heads.q_heads, std::nan(""));
  auto run_item = [&](uint32_t chunk, uint32_t sequence, uint32_t key_begin, uint32_t count, uint32_t partial) {
    const auto keys = item_keys(plan, chunk, key_begin, count);
    for (uint32_t h = 0; h < heads.q_heads; ++h) {
      const uint64_t row = uint64_t{partial} * heads.q_heads + h;
      reference_row(view, heads.kv_head_of(h), &q[(uint64_t{sequence} * heads.q_heads + h) * dq], keys, &po[row * dv],
                    &pl[row]);
    }
  };
  for (const PlanSequenceItem& i : plan.sequence_items)
    run_item(i.chunk, i.sequence, i.key_begin, i.key_count, i.partial);
  for (const PlanTileItem& i : plan.tile_items)
    for (uint32_t s = 0; s < i.sequence_count; ++s)
      run_item(i.chunk, i.sequence_begin + s, i.key_begin, i.key_count, i.partial + s);
  out.assign(uint64_t{plan.sequences} * heads.q_heads * dv, 0.0);
  lse.assign(uint64_t{plan.sequences} * heads.q_heads, 0.0);
  for (uint32_t s = 0; s < plan.sequences; ++s)
    for (uint32_t h = 0; h < heads.q_heads; ++h) {
      double big = -std::numeric_limits<double>::infinity();
      for (uint32_t i = plan.merge_offsets[s]; i < plan.merge_offsets[s + 1]; ++i)
        big = std::max(big, pl[uint64_t{plan.merge_partials[i]} * heads.q_heads + h]);
      double denom = 0;
      const uint64_t o = uint64_t{s} * heads.q_heads + h;
      for (uint32_t i = plan.merge_offsets[s]; i < plan.merge_offsets[s + 1]; ++i) {
        const uint64_t row = uint64_t{plan.merge_partials[i]} * heads.q_heads + h;
        const double w = std::exp(pl[row] - big);
        denom += w;
        for (uint32_t x = 0; x < dv; ++x) out[o * dv + x] += w * po[row * dv + x];
      }
      for (uint32_t x = 0; x < dv; ++x) out[o * dv + x] /= denom;
      lse[o] = big + std::log(denom);
    }
}

// Each sequence's merge list, expanded to keys, must be its path's keys.
void check_tiling(const AttentionWorkPlan& plan, const std::vector<std::vector<KeyLocation>>& want) {
  // partial -> (chunk, key_begin, count)
  struct Span {
    uint32_t chunk = 0, key_begin = 0, count = 0;
  };
  std::vector<Span> spans(plan.partial_count);
  std::vector<int> written(plan.partial_count, 0);
  for (const auto& i : plan.sequence_items) {
    spans[i.partial] = {i.chunk, i.key_begin, i.key_count};
    ++written[i.partial];
  }
  for (const auto& i : plan.tile_items)
    for (uint32_t s = 0; s < i.sequence_count; ++s) {
      spans[i.partial + s] = {i.chunk, i.key_begin, i.key_count};
      ++written[i.partial + s];
    }
  for (int w : written) REQUIRE(w == 1);  // every partial written by exactly one work item
  REQUIRE(plan.sequences == want.size());
  for (uint32_t s = 0; s < plan.sequences; ++s) {
    std::vector<KeyLocation> got;
    for (uint32_t i = plan.merge_offsets[s]; i < plan.merge_offsets[s + 1]; ++i) {
      const Span& sp = spans[plan.merge_partials[i]];
      for (const auto& k : item_keys(plan, sp.chunk, sp.key_begin, sp.count)) got.push_back(k);
    }
    REQUIRE(got.size() == want[s].size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO("sequence " << s << " key " << k);
      REQUIRE(got[k].slot == want[s][k].slot);
      REQUIRE(got[k].row == want[s][k].row);
    }
  }
}

std::vector<double> random_queries(uint64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> q(n);
  for (double& x : q) x = u(rng);
  return q;
}

}  // namespace

TEST_CASE("work plan: paged decode split into partitions reproduces the FP64 reference", "[executor][work_plan]") {
  for (uint64_t seed : {11u, 12u, 13u}) {
    std::mt19937_64 rng(seed);
    INFO("seed " << seed);
    PlainPoolShape shape{0, 16, 2, 8, 8, ScalarType::fp16, ScalarType::fp16};
    const std::vector<uint64_t> contexts{1, 15, 16, 17, 100, 257};
    auto sc = make_paged_scenario(shape, contexts, rng, /*extra_valid=*/true);
    const HeadMapping heads{4, 2};
    const auto requests = sc.decode_requests();
    WorkPlanOptions options;
    options.partition_tokens = 32;
    auto plan = plan_paged_decode(sc.pool.view(), heads, requests, options);
    REQUIRE(plan.ok());
    REQUIRE(plan->tile_items.empty());
    uint32_t want_partials = 0;
    for (uint64_t c : contexts) want_partials += static_cast<uint32_t>((c + 31) / 32);
    REQUIRE(plan->partial_count == want_partials);
    REQUIRE(plan->sequence_items.size() == want_partials);
    std::vector<std::vector<KeyLocation>> want;
    for (const auto& r : requests) want.push_back(table_keys(r.table, shape.block_tokens));
    check_tiling(*plan, want);

    const auto q = random_queries(contexts.size() * heads.q_heads * shape.qk_dim, rng);
    std::vector<double> out, lse, ref(out.size()), ref_lse;
    interpret(*plan, sc.pool.view(), heads, q, out, lse);
    ref.assign(out.size(), 0.0);
    ref_lse.assign(lse.size(), 0.0);
    reference_decode(sc.pool.view(), heads, requests, q, ref, ref_lse);
    REQUIRE(max_row_relative_error<double>(out, ref, shape.v_dim) <= 1e-12);
    REQUIRE(max_abs_error<double>(lse, ref_lse) <= 1e-12);
  }
}

TEST_CASE("work plan: the 0x0BE tree runs chunk-first above tau and merges exactly", "[executor][work_plan]") {
  FourSequenceTree tree;
  const PagedKvView view = tree.pool.view();
  const HeadMapping heads = tree.snapshot.contract.heads;
  std::mt19937_64 rng(0x0BE1);
  const auto q = random_queries(4 * tree.snapshot.contract.qk_dim, rng);
  std::vector<double> ref(4 * 3), ref_lse(4);
  reference_snapshot(view, tree.snapshot, q, ref, ref_lse);
  std::vector<std::vector<KeyLocation>> want;
  for (uint32_t s = 0; s < 4; ++s) want.push_back(path_keys(tree.snapshot, s));

  // tau = 1 (Hydragen): C0 (coverage 4), C1 and C2 (coverage 2) are batched;
  // the four private chunks run sequence-first. 4 + 2 + 2 + 4 = 12 partials,
  // three per sequence.
  auto plan = plan_shared_prefix(view, tree.snapshot, tree.snapshot.fence(), heads, {});
  REQUIRE(plan.ok());
  REQUIRE(plan->tile_items.size() == 3);
  REQUIRE(plan->sequence_items.size() == 4);
  REQUIRE(plan->partial_count == 12);
  for (uint32_t s = 0; s < 4; ++s) REQUIRE(plan->merge_offsets[s + 1] - plan->merge_offsets[s] == 3);
  // Rows read per K/V head: chunk-first reads C0, C1, C2 once (2 + 1 + 2),
  // privates 2 + 1 + 1 + 1: 10, the tree's unique rows (0x0BE ledger).
  REQUIRE(plan->key_rows_read() == 10);
  check_tiling(*plan, want);
  std::vector<double> out, lse;
  interpret(*plan, view, heads, q, out, lse);
  REQUIRE(max_row_relative_error<double>(out, ref, 3) <= 1e-12);
  REQUIRE(max_abs_error<double>(lse, ref_lse) <= 1e-12);

  // tau = 2: only C0 exceeds it; C1 and C2 run once per reading sequence, so
  // 19 logical rows minus C0's saved 6: 13 rows read.
  ExecutionSnapshot s2 = tree.snapshot;
  s2.contract.shared_threshold = 2;
  auto plan2 = plan_shared_prefix(view, s2, s2.fence(), heads, {});
  REQUIRE(plan2.ok());
  REQUIRE(plan2->tile_items.size() == 1);
  REQUIRE(plan2->sequence_items.size() == 8);
  REQUIRE(plan2->key_rows_read() == 13);
  check_tiling(*plan2, want);
  interpret(*plan2, view, heads, q, out, lse);
  REQUIRE(max_row_relative_error<double>(out, ref, 3) <= 1e-12);

  // tau = 4: nothing is batched; every sequence reads its 19 / 4 rows.
  s2.contract.shared_threshold = 4;
  auto plan4 = plan_shared_prefix(view, s2, s2.fence(), heads, {});
  REQUIRE(plan4.ok());
  REQUIRE(plan4->tile_items.empty());
  REQUIRE(plan4->key_rows_read() == 19);
}

TEST_CASE("work plan: random shared-prefix shapes tile every path exactly once", "[executor][work_plan]") {
  const uint64_t seed = 0x9A27;
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 24; ++trial) {
    INFO("seed " << seed << " trial " << trial);
    SharedPrefixShape shape;
    shape.prefix_tokens = 1 + static_cast<uint32_t>(rng() % 300);
    const uint32_t b = 1 + static_cast<uint32_t>(rng() % 9);
    for (uint32_t i = 0; i < b; ++i) shape.suffix_tokens.push_back(1 + static_cast<uint32_t>(rng() % 70));
    shape.block_tokens = 16;
    shape.chunk_tokens = 16u << (rng() % 3);
    const uint32_t g = 1u << (rng() % 4);
    shape.contract = ExecutionContract{HeadMapping{2 * g, 2},           8, 8, ScalarType::fp32, ScalarType::fp32,
                                       static_cast<uint32_t>(rng() % 4)};
    auto w = build_shared_prefix_workload(shape);
    REQUIRE(w.ok());
    PlainPool pool(PlainPoolShape{w->slot_count, 16, 2, 8, 8, ScalarType::fp32, ScalarType::fp32});
    for (uint32_t slot = 0; slot < w->slot_count; ++slot) pool.fill_block(slot, 16, rng);
    WorkPlanOptions options;
    options.partition_tokens = 16u << (rng() % 4);
    options.tile_sequences = 1 + static_cast<uint32_t>(rng() % 4);
    auto plan = plan_shared_prefix(pool.view(), w->snapshot, w->snapshot.fence(), shape.contract.heads, options);
    REQUIRE(plan.ok());
    std::vector<std::vector<KeyLocation>> want;
    for (uint32_t s = 0; s < b; ++s) want.push_back(path_keys(w->snapshot, s));
    check_tiling(*plan, want);
    for (const auto& t : plan->tile_items) REQUIRE(t.sequence_count <= options.tile_sequences);
  }
}

TEST_CASE("work plan: bad arguments are refused before anything is planned", "[executor][work_plan]") {
  std::mt19937_64 rng(5);
  auto sc = make_paged_scenario(PlainPoolShape{0, 16, 2, 8, 8, ScalarType::fp32, ScalarType::fp32}, {40}, rng, false);
  const auto requests = sc.decode_requests();
  WorkPlanOptions options;
  options.kernel_block_tokens = 8;
  options.partition_tokens = 12;  // not a multiple of P_k = 8
  auto bad_part = plan_paged_decode(sc.pool.view(), HeadMapping{4, 2}, requests, options);
  REQUIRE(!bad_part.ok());
  REQUIRE(bad_part.error().field == "partition_tokens");
  auto bad_heads = plan_paged_decode(sc.pool.view(), HeadMapping{3, 2}, requests, {});
  REQUIRE(bad_heads.error().code == ErrorCode::executor_head_mapping);
  auto none = plan_paged_decode(sc.pool.view(), HeadMapping{4, 2}, {}, {});
  REQUIRE(none.error().code == ErrorCode::invalid_argument);

  FourSequenceTree tree;
  SnapshotFence stale = tree.snapshot.fence();
  stale.tree_version += 1;
  auto refused = plan_shared_prefix(tree.pool.view(), tree.snapshot, stale, tree.snapshot.contract.heads, {});
  REQUIRE(refused.error().code == ErrorCode::executor_stale_snapshot);
}

}  // namespace kvrt::test
