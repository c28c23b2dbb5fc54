// [gpu][attention] The CUDA attention kernels against the FP64 monolithic
// reference (services/executor/reference_attention.hpp) on the same stored
// rows: fp32 accumulation over exactly widened fp32/fp16/bf16 rows must stay
// within 1e-5 row-relative (the executor's documented bound), outputs are
// poisoned (NaN) before every launch, and pools carry NaN in every padding
// row, so an unwritten output or a padding read fails.
#include <catch2/catch.hpp>
#include <random>

#include "services/executor/reference_attention.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "tests/gpu/gpu_fixture.hpp"
#include "tests/support/shared_prefix_tree_fixture.hpp"

namespace kvrt::test {
namespace {

constexpr double kRowTolerance = 1e-5;
constexpr double kLseTolerance = 2e-5;

struct DeviceRun {
  std::vector<float> out, lse;
  gpu::DeviceAttentionReceipt receipt;
};

std::vector<float> random_queries(uint64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> q(n);
  for (float& x : q) x = u(rng);
  return q;
}

// Runs decode (snapshot == nullptr) or the cascade on the device.
DeviceRun run_device(DevicePool& pool, const HeadMapping& heads, std::span<const DecodeRequest> requests,
                     const ExecutionSnapshot* snapshot, const std::vector<float>& q, const WorkPlanOptions& options) {
  const uint64_t rows = (snapshot ? snapshot->sequences.size() : requests.size()) * heads.q_heads;
  const uint32_t d = pool.layer.view.v.head_dim;
  DeviceBytes dq = device_floats(q), dout(rows * d * sizeof(float)), dlse(rows * sizeof(float));
  dout.poison();
  dlse.poison();
  gpu::DeviceAttentionWorkspace ws;
  auto r = snapshot ? gpu::cuda_shared_prefix(pool.layer, *snapshot, snapshot->fence(), heads, dq.floats(),
                                              dout.floats(), dlse.floats(), options, ws)
                    : gpu::cuda_paged_decode(pool.layer, heads, requests, dq.floats(), dout.floats(), dlse.floats(),
                                             options, ws);
  if (!r.ok()) FAIL(r.error().describe());
  return DeviceRun{dout.download<float>(rows * d), dlse.download<float>(rows), *r};
}

double lse_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}

const char* dtype_name(ScalarType t) {
  return t == ScalarType::fp32 ? "fp32" : t == ScalarType::fp16 ? "fp16" : "bf16";
}

}  // namespace

TEST_CASE("cuda paged decode: random shapes against the FP64 reference", "[gpu][attention]") {
  const uint64_t seed = 0xC0DE7;
  std::mt19937_64 rng(seed);
  for (ScalarType dtype : {ScalarType::fp32, ScalarType::fp16, ScalarType::bf16})
    for (uint32_t d : {64u, 128u})
      for (uint32_t g : {1u, 2u, 4u, 8u}) {
        const HeadMapping heads{2 * g, 2};
        INFO("seed " << seed << " dtype " << dtype_name(dtype) << " d " << d << " G " << g);
        const std::vector<uint64_t> contexts{1, 31, 32, 33, 500, 1537, 4099};
        auto sc = make_paged_scenario(PlainPoolShape{0, 16, 2, d, d, dtype, dtype}, contexts, rng, true);
        DevicePool pool(sc.pool);
        const auto requests = sc.decode_requests();
        const auto q = random_queries(contexts.size() * heads.q_heads * d, rng);
        std::vector<double> ref(contexts.size() * heads.q_heads * d), ref_lse(contexts.size() * heads.q_heads);
        reference_decode(sc.pool.view(), heads, requests, widened(q), ref, ref_lse);
        for (uint32_t part : {0u, 64u}) {
          WorkPlanOptions options;
          options.partition_tokens = part;
          const DeviceRun got = run_device(pool, heads, requests, nullptr, q, options);
          INFO("partition " << part);
          CHECK(max_row_relative_error<float>(got.out, ref, d) <= kRowTolerance);
          CHECK(lse_error(got.lse, ref_lse) <= kLseTolerance);
        }
      }
}

TEST_CASE("cuda cascade: the 0x0BE tree at kernel widths reproduces its monolithic rows",
          "[gpu][attention][memcheck]") {
  for (ScalarType dtype : {ScalarType::fp32, ScalarType::bf16}) {
    INFO("dtype " << dtype_name(dtype));
    FourSequenceTree tree(64, 64, dtype, HeadMapping{4, 2});
    DevicePool pool(tree.pool);
    std::mt19937_64 rng(0x0BE2);
    const HeadMapping heads = tree.snapshot.contract.heads;
    const auto q = random_queries(4 * heads.q_heads * 64, rng);
    std::vector<double> ref(4 * heads.q_heads * 64), ref_lse(4 * heads.q_heads);
    reference_snapshot(tree.pool.view(), tree.snapshot, widened(q), ref, ref_lse);
    for (uint32_t tau : {1u, 2u, 4u}) {
      INFO("tau " << tau);
      ExecutionSnapshot s = tree.snapshot;
      s.contract.shared_threshold = tau;
      const DeviceRun got = run_device(pool, heads, {}, &s, q, {});
      CHECK(max_row_relative_error<float>(got.out, ref, 64) <= kRowTolerance);
      CHECK(lse_error(got.lse, ref_lse) <= kLseTolerance);
      CHECK(got.receipt.key_rows_read == (tau == 1 ? 10u : tau == 2 ? 13u : 19u));  // 0x0BE ledger
    }
  }
}

TEST_CASE("cuda cascade: shared-prefix batches agree with the reference and with paged decode", "[gpu][attention]") {
  const uint64_t seed = 0xCA5C;
  std::mt19937_64 rng(seed);
  for (uint32_t trial = 0; trial < 9; ++trial) {
    SharedPrefixShape shape;
    shape.prefix_tokens = 16 * (13 + static_cast<uint32_t>(rng() % 56));  // P_a | S: tables exist (0x0BI)
    const uint32_t b = 2 + static_cast<uint32_t>(rng() % 20);
    for (uint32_t i = 0; i < b; ++i) shape.suffix_tokens.push_back(1 + static_cast<uint32_t>(rng() % 150));
    shape.chunk_tokens = 64;
    shape.block_tokens = 16;
    const uint32_t g = 1u << (trial % 4);
    const uint32_t d = trial % 2 == 0 ? 128 : 64;
    const ScalarType dtype = trial % 3 == 0 ? ScalarType::fp32 : trial % 3 == 1 ? ScalarType::fp16 : ScalarType::bf16;
    shape.contract = ExecutionContract{HeadMapping{2 * g, 2}, d, d, dtype, dtype, trial % 2 == 0 ? 1u : 3u};
    INFO("seed " << seed << " trial " << trial << " B " << b << " S " << shape.prefix_tokens << " G " << g);
    auto w = build_shared_prefix_workload(shape);
    REQUIRE(w.ok());
    PlainPool host(PlainPoolShape{w->slot_count, 16, 2, d, d, dtype, dtype});
    for (uint32_t slot = 0; slot < w->slot_count; ++slot) host.fill_block(slot, 16, rng);
    DevicePool pool(host);
    const HeadMapping heads = shape.contract.heads;
    const auto q = random_queries(uint64_t{b} * heads.q_heads * d, rng);
    std::vector<double> ref(uint64_t{b} * heads.q_heads * d), ref_lse(uint64_t{b} * heads.q_heads);
    reference_snapshot(host.view(), w->snapshot, widened(q), ref, ref_lse);
    WorkPlanOptions options;
    options.partition_tokens = 128;
    options.tile_sequences = 1 + static_cast<uint32_t>(rng() % (64 / g));
    const DeviceRun cascade = run_device(pool, heads, {}, &w->snapshot, q, options);
    CHECK(max_row_relative_error<float>(cascade.out, ref, d) <= kRowTolerance);
    CHECK(lse_error(cascade.lse, ref_lse) <= kLseTolerance);
    if (b > shape.contract.shared_threshold) CHECK(cascade.receipt.tile_items > 0);
    const auto tables = w->tables();
    REQUIRE(!tables.empty());
    const DeviceRun paged = run_device(pool, heads, tables, nullptr, q, options);
    CHECK(max_row_relative_error<float>(paged.out, ref, d) <= kRowTolerance);
    // The cascade reads the shared prefix once per tile instead of once per sequence.
    CHECK(cascade.receipt.key_rows_read < paged.receipt.key_rows_read);
  }
}

TEST_CASE("cuda launchers refuse bad arguments before touching the device", "[gpu][attention][memcheck]") {
  std::mt19937_64 rng(77);
  auto sc =
      make_paged_scenario(PlainPoolShape{0, 16, 2, 64, 64, ScalarType::fp16, ScalarType::fp16}, {40, 70}, rng, false);
  DevicePool pool(sc.pool);
  const auto requests = sc.decode_requests();
  const auto q = random_queries(2 * 4 * 64, rng);
  DeviceBytes dq = device_floats(q), dout(2 * 4 * 64 * sizeof(float));
  gpu::DeviceAttentionWorkspace ws;
  auto refused = [&](const Result<gpu::DeviceAttentionReceipt>& r, ErrorCode code) {
    REQUIRE(!r.ok());
    CHECK(r.error().code == code);
    for (float x : dout.download<float>(2 * 4 * 64)) REQUIRE(std::isnan(x));  // outputs untouched
  };
  dout.poison();
  // Output buffer one row short.
  gpu::DeviceFloats short_out = dout.floats();
  short_out.size -= 64;
  refused(gpu::cuda_paged_decode(pool.layer, HeadMapping{4, 2}, requests, dq.floats(), short_out, {}, {}, ws),
          ErrorCode::executor_shape_mismatch);
  // G = 3 has no kernel.
  refused(gpu::cuda_paged_decode(pool.layer, HeadMapping{6, 2}, requests, dq.floats(), dout.floats(), {}, {}, ws),
          ErrorCode::executor_shape_mismatch);
  // A table reading a padding row (visible rows above committed rows).
  std::vector<uint32_t> valid = sc.valid[0];
  valid.back() -= 1;
  std::vector<DecodeRequest> padded(requests.begin(), requests.end());
  padded[0].table.valid_rows = valid;
  refused(gpu::cuda_paged_decode(pool.layer, HeadMapping{4, 2}, padded, dq.floats(), dout.floats(), {}, {}, ws),
          ErrorCode::row_not_valid);
  // K and V in different dtypes.
  gpu::DeviceKvLayer mixed = pool.layer;
  mixed.view.v.dtype = ScalarType::bf16;
  refused(gpu::cuda_paged_decode(mixed, HeadMapping{4, 2}, requests, dq.floats(), dout.floats(), {}, {}, ws),
          ErrorCode::executor_unsupported_dtype);
  // A stale snapshot fence.
  FourSequenceTree tree(64, 64, ScalarType::fp16, HeadMapping{4, 2});
  DevicePool tree_pool(tree.pool);
  SnapshotFence stale = tree.snapshot.fence();
  stale.tree_version += 1;
  DeviceBytes tq = device_floats(random_queries(4 * 4 * 64, rng)), tout(4 * 4 * 64 * sizeof(float));
  tout.poison();
  auto r = gpu::cuda_shared_prefix(tree_pool.layer, tree.snapshot, stale, HeadMapping{4, 2}, tq.floats(), tout.floats(),
                                   {}, {}, ws);
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::executor_stale_snapshot);
  // A head width the kernels do not take.
  auto narrow =
      make_paged_scenario(PlainPoolShape{0, 16, 2, 32, 32, ScalarType::fp16, ScalarType::fp16}, {40}, rng, false);
  DevicePool narrow_pool(narrow.pool);
  const auto narrow_requests = narrow.decode_requests();
  auto n = gpu::cuda_paged_decode(narrow_pool.layer, HeadMapping{4, 2}, narrow_requests, dq.floats(),
                                  gpu::DeviceFloats{dout.floats().data, 4 * 32}, {}, {}, ws);
  REQUIRE(!n.ok());
  CHECK(n.error().code == ErrorCode::executor_shape_mismatch);
}

}  // namespace kvrt::test
