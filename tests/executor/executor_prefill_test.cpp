// [executor] paged prefill of a suffix over a cached prefix, causal within the
// suffix, chunked, against the FP64 reference.
#include <catch2/catch.hpp>

#include "services/executor/paged_decode.hpp"
#include "services/executor/paged_prefill.hpp"
#include "services/executor/reference_attention.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

template <class T>
double prefill_error(const PagedScenario& sc, const std::vector<PrefillRequest>& requests, const HeadMapping& heads,
                     const std::vector<double>& q64, uint32_t chunk, uint32_t p_k, ThreadPool* pool,
                     const std::vector<double>& want, const std::vector<double>& want_lse, double* lse_error) {
  const PagedKvView view = sc.pool.view();
  std::vector<T> q(q64.begin(), q64.end()), out = poisoned<T>(want.size()), lse = poisoned<T>(want_lse.size());
  PrefillArgsT<T> args{heads, requests, q, out, lse, chunk, p_k};
  auto r = paged_prefill(view, args, pool);
  if (!r.ok()) FAIL(r.error().describe());
  *lse_error = max_abs_error<T>(lse, want_lse);
  return max_row_relative_error<T>(out, want, view.v.head_dim);
}

}  // namespace

TEST_CASE("paged prefill of a suffix matches the causal FP64 reference", "[executor][prefill]") {
  const uint64_t seed = 0x9F111;
  std::mt19937_64 rng(seed);
  ThreadPool pool(3);
  for (int trial = 0; trial < 16; ++trial) {
    PlainPoolShape shape;
    shape.block_tokens = std::array{4u, 8u, 16u}[rng() % 3];
    shape.kv_heads = 1 + rng() % 2;
    shape.qk_dim = std::array{8u, 16u, 32u, 20u}[rng() % 4];
    shape.v_dim = std::array{8u, 16u, 12u}[rng() % 3];
    shape.k_dtype = shape.v_dtype = std::array{ScalarType::fp32, ScalarType::fp16, ScalarType::bf16}[trial % 3];
    const HeadMapping heads{shape.kv_heads * uint32_t(1 + rng() % 4), shape.kv_heads};
    std::vector<uint64_t> contexts(1 + rng() % 3);
    for (auto& c : contexts) c = 1 + rng() % 150;
    const PagedScenario sc = make_paged_scenario(shape, contexts, rng, true);
    std::vector<PrefillRequest> requests;
    uint64_t rows = 0;
    const auto tables = sc.decode_requests();
    for (const auto& t : tables) {
      const uint32_t suffix = static_cast<uint32_t>(1 + rng() % t.table.context_tokens);  // 1 .. T, T = no prefix hit
      requests.push_back(PrefillRequest{t.table, suffix});
      rows += suffix;
    }
    const auto q64 = widened(random_values<float>(rows * heads.q_heads * shape.qk_dim, rng, 2.0));
    std::vector<double> want(rows * heads.q_heads * shape.v_dim), want_lse(rows * heads.q_heads);
    reference_prefill(sc.pool.view(), heads, requests, q64, want, want_lse);
    for (const uint32_t chunk : {1u, 7u, 64u}) {
      const uint32_t p_k = (rng() & 1) ? shape.block_tokens : shape.block_tokens / 2;
      INFO("seed " << seed << " trial " << trial << " chunk " << chunk << " P_k " << p_k << " P_a "
                   << shape.block_tokens << " dtype " << to_string(shape.k_dtype));
      double lse_err = 0;
      CHECK(prefill_error<float>(sc, requests, heads, q64, chunk, p_k, &pool, want, want_lse, &lse_err) <= 1e-5);
      CHECK(lse_err <= 1e-5);
      CHECK(prefill_error<double>(sc, requests, heads, q64, chunk, p_k, &pool, want, want_lse, &lse_err) <= 1e-12);
      CHECK(lse_err <= 1e-12);
    }
  }
}

TEST_CASE("the last prefill row equals a decode of the same token", "[executor][prefill]") {
  // Causality end to end: the suffix's last token sees exactly the context a
  // decode step sees, so the two kernels must agree on it.
  std::mt19937_64 rng(0x1A57);
  const PlainPoolShape shape{0, 16, 2, 64, 64, ScalarType::fp16, ScalarType::fp16};
  const PagedScenario sc = make_paged_scenario(shape, {200}, rng, false);
  const HeadMapping heads{8, 2};
  const auto tables = sc.decode_requests();
  const std::vector<PrefillRequest> requests{{tables[0].table, 40}};
  const auto q = random_values<double>(40 * 8 * 64, rng, 2.0);
  std::vector<double> out = poisoned<double>(40 * 8 * 64);
  REQUIRE(paged_prefill(sc.pool.view(), PrefillArgs64{heads, requests, q, out, {}, 16, 0}).ok());
  const std::span<const double> last_q(q.data() + 39 * 8 * 64, 8 * 64);
  std::vector<double> decoded = poisoned<double>(8 * 64);
  REQUIRE(paged_decode(sc.pool.view(), DecodeArgs64{heads, tables, last_q, decoded, {}, {}}).ok());
  for (size_t i = 0; i < decoded.size(); ++i) CHECK(out[39 * 8 * 64 + i] == Approx(decoded[i]).margin(1e-12));
}

}  // namespace kvrt::test
