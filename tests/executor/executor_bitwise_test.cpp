// [executor][bitwise] The executor's speed paths change no output bit:
//
//   1. widen_rows (a whole run per call, F16C or portable vector lanes)
//      gives every binary16 / bfloat16 pattern the bits of the scalar
//      conversion the kernels used row by row before (the copy of that loop
//      below), NaN payloads included, at every run shape the windows use.
//   2. End to end, a pool of fp16 / bf16 / fp32 rows in any axis order gives
//      paged decode and paged prefill the same output and LSE bits (memcmp)
//      as an fp32 pool holding those rows widened by the copied per-row loop:
//      the fp32 pool's rows are read in place, with no widening at all, so
//      any difference in the widened windows would show.
//   3. The tile kernel's narrow columns (one vector of query rows, short
//      output tiles) give each row the bits it gets inside a wide tile:
//      prefill with chunks of 1 and 2 tokens (G and 2G rows per work item)
//      against chunks of 64 (64 G rows), row by row.
//
// Every case prints its seed and trial on failure.
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>

#include "services/executor/paged_decode.hpp"
#include "services/executor/paged_prefill.hpp"
#include "tests/support/executor_fixture.hpp"

namespace kvrt::test {
namespace {

using namespace kvrt::executor;

// The widening loop KvWindow ran per row before runs were widened whole
// (scalar_convert.cpp's widen_impl, binary32 output), kept here as the
// reference: one scalar conversion per lane.
void widen_row_before(ScalarType dtype, const std::byte* src, std::ptrdiff_t stride, std::size_t n, float* dst) {
  if (dtype == ScalarType::fp32) {
    const float* s = reinterpret_cast<const float*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = s[std::ptrdiff_t(i) * stride];
    return;
  }
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = dtype == ScalarType::bf16 ? bf16_to_float(s[std::ptrdiff_t(i) * stride])
                                       : fp16_to_float(s[std::ptrdiff_t(i) * stride]);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Index of the first differing element (for the failure message), or size.
template <class T>
std::size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  return std::min(a.size(), b.size());
}

// Where (slot, token, head) rows sit inside one layer's tensor; the three
// orders the executor meets: token-major blocks (both shipped slot-major
// layouts), head-major blocks, and lanes two elements apart.
enum class AxisOrder { token_major, head_major, lane_strided };
constexpr std::array kOrders{AxisOrder::token_major, AxisOrder::head_major, AxisOrder::lane_strided};
const char* order_name(AxisOrder o) {
  return o == AxisOrder::token_major ? "token-major" : o == AxisOrder::head_major ? "head-major" : "lane-strided";
}

class StridedTensor {
 public:
  StridedTensor(ScalarType dtype, AxisOrder order, uint32_t slots, uint32_t block, uint32_t heads, uint32_t dim)
      : dtype_(dtype), dim_(dim) {
    const uint64_t lane = order == AxisOrder::lane_strided ? 2 : 1;
    view_.dtype = dtype;
    view_.head_dim = dim;
    view_.lane_stride = lane;
    if (order == AxisOrder::head_major) {
      view_.token_stride = dim;
      view_.head_stride = uint64_t{block} * dim;
    } else {
      view_.head_stride = lane * dim;
      view_.token_stride = uint64_t{heads} * lane * dim;
    }
    view_.slot_stride = uint64_t{block} * heads * lane * dim;
    bytes_.resize(uint64_t{slots} * view_.slot_stride * view_.scalar_bytes());
    view_.base = bytes_.data();
  }
  // Stores one row (dim values, rounded to the dtype) of (slot, token, head).
  void set_row(uint32_t slot, uint32_t token, uint32_t head, const float* values) {
    std::byte* row = bytes_.data() + (view_.row(slot, token, head) - view_.base);
    for (uint32_t x = 0; x < dim_; ++x)
      narrow_scalars(dtype_, values + x, 1, row + uint64_t{x} * view_.lane_stride * view_.scalar_bytes());
  }
  // The stored row widened by the pre-change per-row loop.
  void row_before(uint32_t slot, uint32_t token, uint32_t head, float* out) const {
    widen_row_before(dtype_, view_.row(slot, token, head), std::ptrdiff_t(view_.lane_stride), dim_, out);
  }
  const KvTensorView& view() const { return view_; }

 private:
  ScalarType dtype_;
  uint32_t dim_;
  KvTensorView view_;
  std::vector<std::byte> bytes_;
};

// Runs decode (one partition and split-K) and prefill (chunks 1, 5, 64) in
// precision T; every output and LSE value, concatenated.
template <class T>
std::vector<T> attention_bits(const PagedKvView& view, const HeadMapping& heads,
                              const std::vector<DecodeRequest>& tables, const std::vector<PrefillRequest>& prefill,
                              const std::vector<double>& q64_decode, const std::vector<double>& q64_prefill,
                              ThreadPool* pool) {
  std::vector<T> all;
  const std::vector<T> qd(q64_decode.begin(), q64_decode.end()), qp(q64_prefill.begin(), q64_prefill.end());
  for (const uint32_t partition : {0u, 2 * view.block_tokens}) {
    std::vector<T> out = poisoned<T>(tables.size() * heads.q_heads * view.v.head_dim);
    std::vector<T> lse = poisoned<T>(tables.size() * heads.q_heads);
    auto r = paged_decode(view, DecodeArgsT<T>{heads, tables, qd, out, lse, AttentionOptions{0, partition}}, pool);
    if (!r.ok()) FAIL(r.error().describe());
    all.insert(all.end(), out.begin(), out.end());
    all.insert(all.end(), lse.begin(), lse.end());
  }
  const uint64_t rows = qp.size() / (uint64_t{heads.q_heads} * view.k.head_dim);
  for (const uint32_t chunk : {1u, 5u, 64u}) {
    std::vector<T> out = poisoned<T>(rows * heads.q_heads * view.v.head_dim), lse = poisoned<T>(rows * heads.q_heads);
    auto r = paged_prefill(view, PrefillArgsT<T>{heads, prefill, qp, out, lse, chunk, 0}, pool);
    if (!r.ok()) FAIL(r.error().describe());
    all.insert(all.end(), out.begin(), out.end());
    all.insert(all.end(), lse.begin(), lse.end());
  }
  return all;
}

// Block tables over `slots` shuffled slots, every row committed and visible.
struct Tables {
  std::vector<std::vector<uint32_t>> slots, valid;
  std::vector<DecodeRequest> decode;
};
Tables make_tables(const std::vector<uint64_t>& contexts, uint32_t block, uint32_t slot_count, std::mt19937_64& rng) {
  std::vector<uint32_t> order(slot_count);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  Tables t;
  std::size_t next = 0;
  for (uint64_t ctx : contexts) {
    std::vector<uint32_t> s, v;
    for (uint64_t done = 0; done < ctx; done += block) {
      s.push_back(order[next++]);
      v.push_back(block);  // every row of every block holds data
    }
    t.slots.push_back(std::move(s));
    t.valid.push_back(std::move(v));
  }
  for (std::size_t r = 0; r < contexts.size(); ++r)
    t.decode.push_back(DecodeRequest{KvBlockTable{t.slots[r], t.valid[r], contexts[r]}});
  return t;
}

}  // namespace

TEST_CASE("run widening gives every fp16 and bf16 pattern the per-row loop's bits", "[executor][bitwise]") {
  // All 65,536 patterns, as rows of every length the vector steps and their
  // scalar tails meet, contiguous, with a row stride, and with strided lanes.
  std::vector<uint16_t> all(65536);
  std::iota(all.begin(), all.end(), uint16_t{0});
  for (const ScalarType dtype : {ScalarType::fp16, ScalarType::bf16}) {
    std::vector<float> want(all.size());  // the per-row loop's lane conversion, pattern by pattern
    for (std::size_t i = 0; i < all.size(); ++i)
      want[i] = dtype == ScalarType::bf16 ? bf16_to_float(all[i]) : fp16_to_float(all[i]);
    for (const uint32_t lanes : {1u, 3u, 7u, 8u, 9u, 16u, 20u, 64u, 128u}) {
      INFO(to_string(dtype) << ", rows of " << lanes << " lanes");
      const std::size_t rows = all.size() / lanes;
      std::vector<float> got(rows * lanes);
      // Contiguous rows: one run.
      widen_rows(dtype, all.data(), lanes, 1, rows, lanes, got.data());
      CHECK(same_bits(got, std::vector<float>(want.begin(), want.begin() + rows * lanes)));
      // Every other row of the patterns: a row stride of 2 * lanes.
      std::vector<float> got_strided(rows / 2 * lanes), want_strided;
      widen_rows(dtype, all.data(), 2 * std::ptrdiff_t(lanes), 1, rows / 2, lanes, got_strided.data());
      for (std::size_t r = 0; r < rows / 2; ++r)
        want_strided.insert(want_strided.end(), want.begin() + 2 * r * lanes, want.begin() + (2 * r + 1) * lanes);
      CHECK(same_bits(got_strided, want_strided));
      // Lanes two apart (even patterns), rows of 2 * lanes scalars.
      std::vector<float> got_lanes(rows / 2 * lanes), want_lanes;
      widen_rows(dtype, all.data(), 2 * std::ptrdiff_t(lanes), 2, rows / 2, lanes, got_lanes.data());
      for (std::size_t i = 0; i < rows / 2 * lanes; ++i) want_lanes.push_back(want[2 * i]);
      CHECK(same_bits(got_lanes, want_lanes));
    }
    // The single-row entry point, at an odd offset (unaligned loads).
    std::vector<float> got(all.size() - 1);
    widen_scalars(dtype, all.data() + 1, 1, got.size(), got.data());
    CHECK(same_bits(got, std::vector<float>(want.begin() + 1, want.end())));
  }
  // Signalling NaNs keep their payload bits (F16C alone would quiet them).
  const uint16_t signalling = 0x7c01;
  float widened = 0;
  widen_rows(ScalarType::fp16, &signalling, 1, 1, 1, 1, &widened);
  CHECK(float_bits(widened) == 0x7f802000u);
  std::vector<uint16_t> eight(8, signalling);
  std::vector<float> eight_out(8);
  widen_rows(ScalarType::fp16, eight.data(), 8, 1, 1, 8, eight_out.data());
  for (float f : eight_out) CHECK(float_bits(f) == 0x7f802000u);
}

TEST_CASE("decode and prefill over fp16, bf16 and fp32 pools equal an fp32 pool of the old-widened rows, bit for bit",
          "[executor][bitwise]") {
  const uint64_t seed = 0xB17E5;
  std::mt19937_64 rng(seed);
  ThreadPool pool(3);
  constexpr std::array kTypes{ScalarType::fp16, ScalarType::bf16, ScalarType::fp32};
  for (int trial = 0; trial < 27; ++trial) {
    const ScalarType k_dtype = kTypes[trial % 3], v_dtype = kTypes[(trial / 3) % 3];
    const AxisOrder order = kOrders[(trial / 9) % 3];
    const uint32_t block = std::array{4u, 8u, 16u}[rng() % 3];
    const uint32_t kv_heads = 1 + rng() % 3;
    const uint32_t dk = std::array{8u, 16u, 20u, 64u, 128u}[rng() % 5];
    const uint32_t dv = rng() % 3 == 0 ? std::array{12u, 16u, 64u}[rng() % 3] : dk;
    const HeadMapping heads{kv_heads * uint32_t(1 + rng() % 9), kv_heads};  // G = 1 .. 9
    std::vector<uint64_t> contexts(1 + rng() % 3);
    uint32_t blocks = 0;
    for (auto& c : contexts) {
      c = 1 + rng() % 200;
      blocks += uint32_t((c + block - 1) / block);
    }
    INFO("seed " << seed << " trial " << trial << ": K " << to_string(k_dtype) << ", V " << to_string(v_dtype) << ", "
                 << order_name(order) << ", P " << block << ", H_kv " << kv_heads << ", G " << heads.group_size()
                 << ", d_qk " << dk << ", d_v " << dv);
    // The pool under test and its fp32 mirror (token-major, read in place).
    StridedTensor k(k_dtype, order, blocks, block, kv_heads, dk), v(v_dtype, order, blocks, block, kv_heads, dv);
    PlainPool mirror(PlainPoolShape{blocks, block, kv_heads, dk, dv, ScalarType::fp32, ScalarType::fp32});
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(std::max(dk, dv)), kw(dk), vw(dv);
    for (uint32_t s = 0; s < blocks; ++s)
      for (uint32_t t = 0; t < block; ++t)
        for (uint32_t h = 0; h < kv_heads; ++h) {
          // Mostly uniform values; a few tiny ones (binary16 subnormals) and
          // negative zeros so the conversions' other branches are read too.
          for (uint32_t x = 0; x < dk; ++x) row[x] = rng() % 16 == 0 ? u(rng) * 1e-6f : u(rng);
          if (rng() % 8 == 0) row[rng() % dk] = -0.0f;
          k.set_row(s, t, h, row.data());
          for (uint32_t x = 0; x < dv; ++x) row[x] = rng() % 16 == 0 ? u(rng) * 1e-6f : u(rng);
          v.set_row(s, t, h, row.data());
          k.row_before(s, t, h, kw.data());
          v.row_before(s, t, h, vw.data());
          mirror.set_row(s, t, h, kw, vw);
        }
    PagedKvView view = mirror.view();
    view.k = k.view();
    view.v = v.view();
    const Tables tables = make_tables(contexts, block, blocks, rng);
    std::vector<PrefillRequest> prefill;
    uint64_t suffix_rows = 0;
    for (const auto& d : tables.decode) {
      const uint32_t suffix = uint32_t(1 + rng() % d.table.context_tokens);
      prefill.push_back(PrefillRequest{d.table, suffix});
      suffix_rows += suffix;
    }
    const auto qd = random_values<double>(contexts.size() * heads.q_heads * dk, rng, 2.0);
    const auto qp = random_values<double>(suffix_rows * heads.q_heads * dk, rng, 2.0);

    const auto got = attention_bits<float>(view, heads, tables.decode, prefill, qd, qp, &pool);
    const auto want = attention_bits<float>(mirror.view(), heads, tables.decode, prefill, qd, qp, &pool);
    INFO("FP32: first differing value " << first_difference(got, want) << " of " << want.size());
    CHECK(same_bits(got, want));
    const auto got64 = attention_bits<double>(view, heads, tables.decode, prefill, qd, qp, &pool);
    const auto want64 = attention_bits<double>(mirror.view(), heads, tables.decode, prefill, qd, qp, &pool);
    INFO("FP64: first differing value " << first_difference(got64, want64) << " of " << want64.size());
    CHECK(same_bits(got64, want64));
  }
}

TEST_CASE("a query row's bits do not depend on how many rows share its tile", "[executor][bitwise]") {
  // Chunks of 1 and 2 tokens put G and 2G rows in a work item (one vector of
  // columns or less for G <= 4: the narrow score tile and short output
  // tiles); chunks of 64 put 64 G rows in it (pairs of vectors, 6-row output
  // tiles, plus an odd last vector for some G). Each row must come out the
  // same, in FP32 and in FP64 (W = 4 lanes, so other widths are crossed).
  const uint64_t seed = 0x7111E;
  std::mt19937_64 rng(seed);
  ThreadPool pool(2);
  for (int trial = 0; trial < 24; ++trial) {
    PlainPoolShape shape;
    shape.block_tokens = std::array{8u, 16u}[rng() % 2];
    shape.kv_heads = 1 + rng() % 2;
    shape.qk_dim = std::array{8u, 16u, 24u, 40u, 128u}[rng() % 5];
    shape.v_dim = std::array{8u, 16u, 24u, 40u}[rng() % 4];
    shape.k_dtype = shape.v_dtype = std::array{ScalarType::fp16, ScalarType::bf16, ScalarType::fp32}[trial % 3];
    const HeadMapping heads{shape.kv_heads * uint32_t(1 + trial % 8), shape.kv_heads};  // G = 1 .. 8
    const std::vector<uint64_t> contexts{1 + rng() % 300, 1 + rng() % 300};
    const PagedScenario sc = make_paged_scenario(shape, contexts, rng, false);
    const auto tables = sc.decode_requests();
    std::vector<PrefillRequest> requests;
    uint64_t rows = 0;
    for (const auto& t : tables) {
      const uint32_t suffix = uint32_t(1 + rng() % std::min<uint64_t>(t.table.context_tokens, 140));
      requests.push_back(PrefillRequest{t.table, suffix});
      rows += suffix;
    }
    const auto q64 = random_values<double>(rows * heads.q_heads * shape.qk_dim, rng, 2.0);
    INFO("seed " << seed << " trial " << trial << ": " << to_string(shape.k_dtype) << ", H_kv " << shape.kv_heads
                 << ", G " << heads.group_size() << ", d_qk " << shape.qk_dim << ", d_v " << shape.v_dim);
    const auto run = [&]<class T>(T, uint32_t chunk) {
      const std::vector<T> q(q64.begin(), q64.end());
      std::vector<T> out = poisoned<T>(rows * heads.q_heads * shape.v_dim), lse = poisoned<T>(rows * heads.q_heads);
      auto r = paged_prefill(sc.pool.view(), PrefillArgsT<T>{heads, requests, q, out, lse, chunk, 0}, &pool);
      if (!r.ok()) FAIL(r.error().describe());
      out.insert(out.end(), lse.begin(), lse.end());
      return out;
    };
    const auto wide = run(0.0f, 64);
    for (const uint32_t chunk : {1u, 2u}) {
      const auto narrow = run(0.0f, chunk);
      INFO("FP32, chunk " << chunk << ": first differing value " << first_difference(narrow, wide));
      CHECK(same_bits(narrow, wide));
    }
    const auto wide64 = run(0.0, 64);
    const auto narrow64 = run(0.0, 1);
    INFO("FP64: first differing value " << first_difference(narrow64, wide64));
    CHECK(same_bits(narrow64, wide64));
  }
}

}  // namespace kvrt::test
