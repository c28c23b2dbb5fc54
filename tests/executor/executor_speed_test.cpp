// [executor-speed] Timings of paged decode and prefill per storage dtype, for
// docs/benchmarks.md ("attention", fp16/bf16 rows). Hidden ([.]): it prints
// and asserts nothing but that every call succeeds. Run with
//   build-exec/tests/kvrt_tests "[executor-speed]"
// Each figure is the best of several repetitions, so a shared machine's
// interruptions inflate it less; the spread between runs is still the
// machine's, see docs/benchmarks.md.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "services/executor/paged_decode.hpp"
#include "services/executor/paged_prefill.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;
using Clock = std::chrono::steady_clock;

// Best time of `reps` repetitions of `inner` calls, per call [s].
template <class F>
double best_seconds(int reps, int inner, F&& call) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) call();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / inner);
  }
  return best;
}

const char* name(ScalarType t) { return t == ScalarType::fp16 ? "fp16" : t == ScalarType::bf16 ? "bf16" : "fp32"; }

}  // namespace

TEST_CASE("attention timings per storage dtype (prints, asserts nothing)", "[.][executor-speed]") {
  std::mt19937_64 rng(0x5BEED);
  for (const ScalarType dtype : {ScalarType::fp16, ScalarType::bf16, ScalarType::fp32}) {
    // Serving shape of the attention benchmark: H_q 32, H_kv 8, d 128, P 16,
    // one request of 16K rows; FP32 accumulation.
    {
      const PlainPoolShape shape{0, 16, 8, 128, 128, dtype, dtype};
      const PagedScenario sc = make_paged_scenario(shape, {16384}, rng, false);
      const auto tables = sc.decode_requests();
      const HeadMapping heads{32, 8};
      const auto q = random_values<float>(32 * 128, rng);
      std::vector<float> out(32 * 128), lse(32);
      const DecodeArgs args{heads, tables, q, out, lse, {}};
      const double bytes = 16384.0 * 8 * (128 + 128) * (dtype == ScalarType::fp32 ? 4 : 2);  // K+V read [bytes]
      for (const unsigned threads : {1u, 2u}) {
        ThreadPool pool(threads);
        const double s = best_seconds(5, 10, [&] { REQUIRE(paged_decode(sc.pool.view(), args, &pool).ok()); });
        std::printf(
            "[executor-speed] %s paged decode, 16K rows, H_q 32 H_kv 8 d 128, %u thread(s): %.3f ms, %.2f GB/s of "
            "stored K+V\n",
            name(dtype), threads, s * 1e3, bytes / s / 1e9);
      }
      // A 128-token suffix over 4K cached rows: the tile kernel's wide path.
      const PagedScenario sc4 = make_paged_scenario(shape, {4096}, rng, false);
      const auto t4 = sc4.decode_requests();
      const std::vector<PrefillRequest> requests{{t4[0].table, 128}};
      const auto qp = random_values<float>(128 * 32 * 128, rng);
      std::vector<float> op(128 * 32 * 128), lp(128 * 32);
      ThreadPool pool(2);
      const double s = best_seconds(3, 1, [&] {
        REQUIRE(paged_prefill(sc4.pool.view(), PrefillArgs{heads, requests, qp, op, lp, 64, 0}, &pool).ok());
      });
      std::printf("[executor-speed] %s paged prefill, 128-token suffix over 4K rows, 2 threads: %.2f ms\n", name(dtype),
                  s * 1e3);
    }
    // The reference model's attention at decode (services/model: paged_prefill
    // with a suffix of 1): H_kv 2, G 2, d 16, 16 sequences of 300 rows, 1 thread.
    {
      const PlainPoolShape shape{0, 16, 2, 16, 16, dtype, dtype};
      const PagedScenario sc = make_paged_scenario(shape, std::vector<uint64_t>(16, 300), rng, false);
      const auto tables = sc.decode_requests();
      std::vector<PrefillRequest> requests;
      for (const auto& t : tables) requests.push_back({t.table, 1});
      const HeadMapping heads{4, 2};
      const auto q = random_values<float>(16 * 4 * 16, rng);
      std::vector<float> out(16 * 4 * 16), lse(16 * 4);
      ThreadPool pool(1);
      const double s = best_seconds(5, 200, [&] {
        REQUIRE(paged_prefill(sc.pool.view(), PrefillArgs{heads, requests, q, out, lse, 64, 0}, &pool).ok());
      });
      std::printf(
          "[executor-speed] %s model-shaped decode (prefill of 1 row x 16 sequences over 300 rows, H_kv 2 G 2 "
          "d 16), 1 thread: %.1f us per call\n",
          name(dtype), s * 1e6);
    }
  }
}

}  // namespace kvrt::test
