// [executor] the building blocks: hand-written fp16/bf16 conversions, the
// exact merge and its empty identity (0x0BA), the thread pool, the blocked
// matrix multiply the benchmark's compute roof uses.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "services/executor/executor.hpp"  // the umbrella header compiles on its own
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

// The value a bfloat16 bit pattern denotes, in binary64.
double bf16_value(uint16_t b) { return double(bf16_to_float(b)); }

}  // namespace

TEST_CASE("fp16 conversions agree with the compiler's binary16 over every value", "[executor][convert]") {
  // Widening: all 65,536 patterns against _Float16 (GCC's own conversion).
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    const float mine = fp16_to_float(bits), theirs = float(ref);
    if (std::isnan(theirs)) {
      CHECK(std::isnan(mine));
      continue;
    }
    if (float_bits(mine) != float_bits(theirs)) FAIL("fp16 " << h << ": " << mine << " vs " << theirs);
  }
  // Narrowing: every binary16 value, the midpoints between neighbours (ties
  // to even), one ulp around them, and random binary32 patterns.
  std::mt19937_64 rng(0xF16);
  auto check = [](float f) {
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    const uint16_t got = float_to_fp16(f);
    if (std::isnan(f)) {
      CHECK(std::isnan(fp16_to_float(got)));
      CHECK((got & 0x8000) == (want & 0x8000));
      return;
    }
    if (got != want) FAIL("narrowing " << f << " (bits " << float_bits(f) << "): " << got << " vs " << want);
  };
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = fp16_to_float(uint16_t(h)), hi = fp16_to_float(uint16_t(h + 1));
    const float mid = float((double(lo) + double(hi)) / 2);  // exact in binary32
    for (const float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      check(f);
      check(-f);
    }
  }
  for (int i = 0; i < 200000; ++i) check(bits_float(static_cast<uint32_t>(rng())));
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 1e9f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), 5.96e-8f, 2.98e-8f, 2.9802322e-8f, 1e-10f})
    check(f), check(-f);
}

TEST_CASE("bf16 narrowing is the nearest value, ties to even", "[executor][convert]") {
  // Brute force: the two bf16 neighbours of a binary32 value are its
  // truncation and the next pattern; pick the nearer in binary64, the even
  // one on a tie, infinity past the largest finite value's midpoint.
  std::mt19937_64 rng(0xBF16);
  auto nearest = [](float f) -> uint16_t {
    const uint32_t u = float_bits(f);
    const uint16_t down = uint16_t(u >> 16), up = uint16_t(down + 1);
    const double x = f, a = bf16_value(down), b = bf16_value(up);
    const double da = std::abs(x - a), db = std::abs(x - b);
    if (da < db) return down;
    if (db < da) return up;
    return (down & 1) ? up : down;
  };
  for (int i = 0; i < 500000; ++i) {
    const float f = bits_float(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      CHECK(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    if ((float_bits(f) & 0x7fffffffu) >= 0x7f7f8000u) continue;  // the overflow band, checked below
    const uint16_t got = float_to_bf16(f), want = nearest(f);
    if (got != want) FAIL("bf16 of bits " << float_bits(f) << ": " << got << " vs " << want);
  }
  // Exact ties: the midpoint between two patterns goes to the even one.
  CHECK(float_to_bf16(bits_float(0x3f808000u)) == 0x3f80);  // 1.00390625: between 0x3f80 and 0x3f81
  CHECK(float_to_bf16(bits_float(0x3f818000u)) == 0x3f82);  // between 0x3f81 (odd) and 0x3f82
  // Largest finite bf16 is 0x7f7f; at or past its upper midpoint, infinity.
  CHECK(float_to_bf16(bits_float(0x7f7f7fffu)) == 0x7f7f);
  CHECK(float_to_bf16(bits_float(0x7f7f8000u)) == 0x7f80);
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  // Widening is exact: every pattern's binary32 value has the same bits above.
  for (uint32_t b = 0; b < 65536; ++b)
    if (!std::isnan(bf16_to_float(uint16_t(b)))) CHECK((float_bits(bf16_to_float(uint16_t(b))) >> 16) == b);
}

TEST_CASE("the merge is exact, never averages, and the empty partition is a two-sided identity", "[executor][merge]") {
  // Scores and values of 7 keys split into partitions [0,3) [3,3) [3,7).
  const double s[7] = {0.3, -2.0, 5.5, 1.0, 4.9, -40.0, 2.2};
  const double v[7] = {1, 2, 3, 4, 5, 6, 7};
  auto state_of = [&](int b, int e) {
    PartialStates<double> st;
    st.reset(1, 1);
    if (b == e) return st;
    double m = -1e300;
    for (int i = b; i < e; ++i) m = std::max(m, s[i]);
    st.valid[0] = uint64_t(e - b);
    st.m[0] = m;
    for (int i = b; i < e; ++i) {
      st.l[0] += std::exp(s[i] - m);
      st.u[0] += std::exp(s[i] - m) * v[i];
    }
    return st;
  };
  PartialStates<double> whole = state_of(0, 7), a = state_of(0, 3), empty = state_of(3, 3), b = state_of(3, 7);
  // merge(a, empty, b) in both orders equals the whole row.
  for (const bool reversed : {false, true}) {
    PartialStates<double> acc;
    acc.reset(1, 1);
    for (PartialStates<double>* p : reversed ? std::vector{&b, &empty, &a} : std::vector{&a, &empty, &b})
      merge_state(acc.row(0), p->valid[0], p->m[0], p->l[0], p->u.data(), 1);
    double o = 0, lse = 0, want = 0, want_lse = 0;
    finalize_state(acc.valid[0], acc.m[0], acc.l[0], acc.u.data(), 1, &o, &lse);
    finalize_state(whole.valid[0], whole.m[0], whole.l[0], whole.u.data(), 1, &want, &want_lse);
    CHECK(acc.valid[0] == 7);
    CHECK(o == Approx(want).epsilon(1e-15));
    CHECK(lse == Approx(want_lse).epsilon(1e-15));
  }
  // Identity on both sides, and e + e = e, with the empty state's fields
  // never read (poison them: a read would produce NaN).
  empty.m[0] = std::numeric_limits<double>::quiet_NaN();
  empty.l[0] = std::numeric_limits<double>::quiet_NaN();
  PartialStates<double> left = a;
  merge_state(left.row(0), empty.valid[0], empty.m[0], empty.l[0], empty.u.data(), 1);
  CHECK(left.m[0] == a.m[0]);
  CHECK(left.l[0] == a.l[0]);
  CHECK(left.u[0] == a.u[0]);
  PartialStates<double> right = empty;
  merge_state(right.row(0), a.valid[0], a.m[0], a.l[0], a.u.data(), 1);
  CHECK(right.m[0] == a.m[0]);
  CHECK(right.u[0] == a.u[0]);
  PartialStates<double> both = empty;
  merge_state(both.row(0), 0, std::numeric_limits<double>::quiet_NaN(), 0.0, empty.u.data(), 1);
  CHECK(both.valid[0] == 0);
  // Hydragen's (O, LSE) merge equals it too; averaging the normalised outputs does not.
  double oa, la, ob, lb, merged, merged_lse, want, want_lse;
  finalize_state(a.valid[0], a.m[0], a.l[0], a.u.data(), 1, &oa, &la);
  finalize_state(b.valid[0], b.m[0], b.l[0], b.u.data(), 1, &ob, &lb);
  finalize_state(whole.valid[0], whole.m[0], whole.l[0], whole.u.data(), 1, &want, &want_lse);
  const double* outs[3] = {&oa, &oa, &ob};
  const double lses[3] = {la, std::numeric_limits<double>::quiet_NaN(), lb};
  const uint64_t valid[3] = {3, 0, 4};
  CHECK(merge_lse<double>(3, outs, lses, valid, 1, &merged, &merged_lse) == 7);
  CHECK(merged == Approx(want).epsilon(1e-15));
  CHECK(merged_lse == Approx(want_lse).epsilon(1e-15));
  CHECK(std::abs((oa + ob) / 2 - want) > 0.1);
  const uint64_t none[2] = {0, 0};
  CHECK(merge_lse<double>(2, outs, lses, none, 1, &merged, &merged_lse) == 0);
}

TEST_CASE("the thread pool runs every item exactly once", "[executor][threads]") {
  for (const unsigned workers : {1u, 2u, 5u}) {
    ThreadPool pool(workers);
    CHECK(pool.workers() == workers);
    for (const size_t items : {size_t(0), size_t(1), size_t(3), size_t(1000)}) {
      std::vector<std::atomic<int>> hits(items);
      std::atomic<unsigned> max_worker{0};
      pool.parallel_for(items, [&](size_t i, unsigned w) {
        hits[i].fetch_add(1);
        unsigned seen = max_worker.load();
        while (w > seen && !max_worker.compare_exchange_weak(seen, w)) {
        }
      });
      for (auto& h : hits) CHECK(h.load() == 1);
      CHECK(max_worker.load() < workers);
    }
  }
}

TEST_CASE("the blocked matrix multiply equals the naive product", "[executor][matmul]") {
  std::mt19937_64 rng(0x3A7);
  ThreadPool pool(2);
  for (const auto& [m, n, k] : {std::tuple{1u, 1u, 1u}, {7u, 5u, 3u}, {100u, 37u, 300u}, {97u, 1030u, 257u}}) {
    INFO(m << " x " << n << " x " << k);
    const auto a = random_values<float>(uint64_t{m} * k, rng), b = random_values<float>(uint64_t{k} * n, rng);
    std::vector<float> c = poisoned<float>(uint64_t{m} * n);
    blocked_matmul(m, n, k, a.data(), k, b.data(), n, c.data(), n, &pool);
    double worst = 0;
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        double want = 0, scale = 0;
        for (uint32_t p = 0; p < k; ++p) {
          want += double(a[i * k + p]) * b[p * n + j];
          scale += std::abs(double(a[i * k + p]) * b[p * n + j]);
        }
        worst = std::max(worst, std::abs(c[i * n + j] - want) / std::max(scale, 1e-30));
      }
    CHECK(worst <= 1e-6);
  }
}

}  // namespace kvrt::test
