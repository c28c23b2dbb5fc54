// Rows kernel (attention_kernels.hpp): a few query rows against one window.
//
// Query rows are taken R at a time, R in {1, 2, 4} (3 rows run as 4 with the
// last row repeated and its results dropped). With W lanes per vector (8
// floats under AVX2), the kernel keeps W accumulators:
//   scores   R rows x W/R key rows per step, so each loaded K vector feeds R
//            FMAs and every K byte is read once for the whole GQA group; the W
//            accumulators reduce into one vector of W dot products, which is
//            exactly W consecutive entries of the token-major score block
//            s[t][r] (one store, no per-dot horizontal sum);
//   softmax  on that token-major block, vectorised with lane i holding row i % R;
//   output   R rows x 2W lanes of d_v held in 2R accumulators across the whole
//            window, each loaded V vector feeding R FMAs.
// While it computes, the kernel requests the rows of its next call (KvRows::
// next_*), one 64-byte line per row at a time, spread over the loops above:
// they read lines in column order across rows, which hardware prefetchers do
// not follow. Whether and where to request is decided once per pass over the
// rows, never inside a step: checked per step it cost a fifth of the
// kernel's time with the data in cache. A vector of W lanes of the stored
// type is at most 32 bytes (storage is never wider than T), so a pass over 2W
// lanes touches at most one line start.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "services/executor/attention_kernels.hpp"
#include "services/executor/simd.hpp"

namespace kvrt::executor::kernels {
namespace {

using simd::kLanes;
using simd::load;
using simd::splat;
using simd::store;
using simd::Vec;

// The line of each of the next call's rows [0, rows) that holds byte
// `offset` (K: every pass; V: only the pass whose lanes start that line).
template <class Rows>
KVRT_INLINE void stream_rows(const std::byte* const* next, uint32_t first_row, Rows rows, uint32_t offset) {
  for (uint32_t i = 0; i < uint32_t{rows}; ++i) __builtin_prefetch(next[first_row + i] + offset, 0, 2);
}

// s[t*R + r] = q_r . k_t for t in [0, n); q rows are q_row[r] ([dk]).
template <class T, int R>
KVRT_INLINE void qk_block(const T* const* q_row, uint32_t dk, const T* const* k, uint32_t n, T* s,
                          const KvRows<T>& kv) {
  constexpr int W = kLanes<T>;
  constexpr int TPS = W / R;  // key rows per step
  const uint32_t main = dk / W * W;
  uint32_t t = 0;
  for (; t + TPS <= n; t += TPS) {
    Vec<T> acc[W];
    for (int i = 0; i < W; ++i) acc[i] = Vec<T>{};
    const auto step = [&](uint32_t x) __attribute__((always_inline)) {
      Vec<T> qv[R];
      for (int r = 0; r < R; ++r) qv[r] = load(q_row[r] + x);
#pragma GCC unroll 8
      for (int j = 0; j < TPS; ++j) {
        const Vec<T> kvec = load(k[t + j] + x);
        for (int r = 0; r < R; ++r) acc[j * R + r] += qv[r] * kvec;
      }
    };
    // Next rows t..t+TPS-1 (those the next call has), one line per 2W lanes:
    // the whole line for fp32, half of it (requested twice) for 16-bit storage.
    const uint32_t streamed = kv.next_k == nullptr || t >= kv.next_n ? 0 : std::min<uint32_t>(TPS, kv.next_n - t);
    uint32_t x = 0;
    // rows: TPS as a constant (the common case: an unrolled request loop) or fewer.
    const auto pass = [&](auto rows) __attribute__((always_inline)) {
      for (; x + 2 * W <= main; x += 2 * W) {
        stream_rows(kv.next_k, t, rows, x * kv.next_lane_bytes);
        step(x);
        step(x + W);
      }
    };
    if (streamed == TPS)
      pass(std::integral_constant<uint32_t, TPS>{});
    else
      pass(streamed);
    for (; x < main; x += W) step(x);
    Vec<T> dots = simd::reduce_lanes(acc);
    if (main != dk)
      for (int j = 0; j < TPS; ++j)
        for (int r = 0; r < R; ++r)
          for (uint32_t x = main; x < dk; ++x) dots[j * R + r] += q_row[r][x] * k[t + j][x];
    store(s + uint64_t{t} * R, dots);
  }
  for (; t < n; ++t)
    for (int r = 0; r < R; ++r) {
      Vec<T> a{};
      for (uint32_t x = 0; x < main; x += W) a += load(q_row[r] + x) * load(k[t] + x);
      T dot = simd::hsum(a);
      for (uint32_t x = main; x < dk; ++x) dot += q_row[r][x] * k[t][x];
      s[uint64_t{t} * R + r] = dot;
    }
}

// Online-softmax step of R rows over a token-major block s[t*R + r]: new
// maxima, rescale of non-empty rows whose maximum grew, probabilities in
// place, their sums into l. An empty row (valid = 0) takes the block maximum
// with no rescale: its m is never compared or subtracted.
template <class T, int R>
KVRT_INLINE void softmax_block(T* s, uint32_t n, RowsState<T> st, uint32_t dv) {
  constexpr int W = kLanes<T>;
  const uint64_t cells = uint64_t{n} * R, main = cells / W * W;
  T row_max[R];
  for (int r = 0; r < R; ++r) row_max[r] = -std::numeric_limits<T>::infinity();
  Vec<T> vmax = splat(-std::numeric_limits<T>::infinity());
  for (uint64_t i = 0; i < main; i += W) vmax = simd::vmax(vmax, load(s + i));
  for (int i = 0; i < W; ++i) row_max[i % R] = std::max(row_max[i % R], vmax[i]);
  for (uint64_t i = main; i < cells; ++i) row_max[i % R] = std::max(row_max[i % R], s[i]);
  Vec<T> shift;
  for (int r = 0; r < R; ++r) {
    T m_new = row_max[r];
    if (st.valid[r] != 0) {
      m_new = std::max(st.m[r], row_max[r]);
      if (m_new > st.m[r]) {
        const T alpha = simd::exp_scalar(st.m[r] - m_new);
        st.l[r] *= alpha;
        T* acc = st.acc + static_cast<uint64_t>(r) * dv;
        for (uint32_t x = 0; x < dv; ++x) acc[x] *= alpha;
      }
    } else {
      st.l[r] = T(0);
    }
    st.m[r] = m_new;
    st.valid[r] += n;
  }
  for (int i = 0; i < W; ++i) shift[i] = st.m[i % R];
  Vec<T> vsum{};
  for (uint64_t i = 0; i < main; i += W) {
    const Vec<T> p = simd::exp_nonpositive(load(s + i) - shift);
    store(s + i, p);
    vsum += p;
  }
  T sum[R];
  for (int r = 0; r < R; ++r) sum[r] = T(0);
  for (int i = 0; i < W; ++i) sum[i % R] += vsum[i];
  for (uint64_t i = main; i < cells; ++i) {
    s[i] = simd::exp_scalar(s[i] - st.m[i % R]);
    sum[i % R] += s[i];
  }
  for (int r = 0; r < R; ++r) st.l[r] += sum[r];
}

// acc_r[:] += sum_t p[t*R + r] v_t[:] for R rows (acc_r = acc + r*dv).
template <class T, int R>
KVRT_INLINE void pv_block(const T* p, const T* const* v, uint32_t n, uint32_t dv, T* acc, const KvRows<T>& kv) {
  constexpr int W = kLanes<T>;
  uint32_t x = 0;
  for (; x + 2 * W <= dv; x += 2 * W) {
    Vec<T> c0[R], c1[R];
    for (int r = 0; r < R; ++r) {
      c0[r] = load(acc + r * dv + x);
      c1[r] = load(acc + r * dv + x + W);
    }
    const auto step = [&](uint32_t t) __attribute__((always_inline)) {
      const Vec<T> v0 = load(v[t] + x);
      const Vec<T> v1 = load(v[t] + x + W);
      for (int r = 0; r < R; ++r) {
        // p - 0 is p exactly (-0 included); written here rather than as
        // splat(p), it compiles to one broadcast straight from memory, where
        // the helper costs a load, an add and a shuffle beside two FMAs.
        const Vec<T> a = p[uint64_t{t} * R + r] - Vec<T>{};
        c0[r] += a * v0;
        c1[r] += a * v1;
      }
    };
    // Next rows' line starting inside lanes [x, x + 2W), if one does, one row per step.
    const uint32_t offset = x * kv.next_lane_bytes;
    const uint32_t streamed =
        kv.next_v == nullptr || offset % 64 >= 2 * W * kv.next_lane_bytes ? 0 : std::min(n, kv.next_n);
    uint32_t t = 0;
    for (; t < streamed; ++t) {
      stream_rows(kv.next_v, t, std::integral_constant<uint32_t, 1>{}, offset);
      step(t);
    }
    for (; t < n; ++t) step(t);
    for (int r = 0; r < R; ++r) {
      store(acc + r * dv + x, c0[r]);
      store(acc + r * dv + x + W, c1[r]);
    }
  }
  for (; x < dv; ++x)
    for (int r = 0; r < R; ++r) {
      T sum = acc[r * dv + x];
      for (uint32_t t = 0; t < n; ++t) sum += p[uint64_t{t} * R + r] * v[t][x];
      acc[r * dv + x] = sum;
    }
}

// R rows starting at row0; `real` of them are distinct (the rest repeat the
// last real row and write into a scratch state that is dropped).
template <class T, int R>
KVRT_INLINE void rows_group(const T* q, uint32_t row0, uint32_t real, uint32_t dk, uint32_t dv, const KvRows<T>& kv,
                            RowsState<T> st, T* scores) {
  const T* q_row[R];
  for (int r = 0; r < R; ++r)
    q_row[r] = q + uint64_t{row0 + std::min<uint32_t>(static_cast<uint32_t>(r), real - 1)} * dk;
  RowsState<T> sub{st.valid + row0, st.m + row0, st.l + row0, st.acc + uint64_t{row0} * dv};
  // A padded group (3 real rows run as 4) works on copies of its states in
  // scratch past the scores, so the repeated row never overwrites a real one.
  uint64_t pad_valid[R];
  T pad_m[R], pad_l[R];
  T* pad_acc = scores + uint64_t{kv.n} * R;  // scratch beyond the scores
  if (real < uint32_t(R)) {
    for (uint32_t r = 0; r < uint32_t(R); ++r) {
      const uint32_t from = row0 + std::min(r, real - 1);
      pad_valid[r] = st.valid[from];
      pad_m[r] = st.m[from];
      pad_l[r] = st.l[from];
      std::copy_n(st.acc + uint64_t{from} * dv, dv, pad_acc + uint64_t{r} * dv);
    }
    sub = RowsState<T>{pad_valid, pad_m, pad_l, pad_acc};
  }
  // Only the first row group streams the next rows in (once per call).
  KvRows<T> stream = kv;
  if (row0 != 0) stream.next_k = stream.next_v = nullptr;
  qk_block<T, R>(q_row, dk, kv.k, kv.n, scores, stream);
  softmax_block<T, R>(scores, kv.n, sub, dv);
  pv_block<T, R>(scores, kv.v, kv.n, dv, sub.acc, stream);
  if (real < uint32_t(R))
    for (uint32_t r = 0; r < real; ++r) {
      st.valid[row0 + r] = pad_valid[r];
      st.m[row0 + r] = pad_m[r];
      st.l[row0 + r] = pad_l[r];
      std::copy_n(pad_acc + uint64_t{r} * dv, dv, st.acc + uint64_t{row0 + r} * dv);
    }
}

template <class T>
KVRT_INLINE void rows_attend_impl(const T* q, uint32_t rows, uint32_t dk, uint32_t dv, const KvRows<T>& kv,
                                  RowsState<T> st, T* scores) {
  if (kv.n == 0) return;
  for (uint32_t r0 = 0; r0 < rows; r0 += 4) {
    const uint32_t real = std::min(4u, rows - r0);
    if (real == 1)
      rows_group<T, 1>(q, r0, 1, dk, dv, kv, st, scores);
    else if (real == 2)
      rows_group<T, 2>(q, r0, 2, dk, dv, kv, st, scores);
    else
      rows_group<T, 4>(q, r0, real, dk, dv, kv, st, scores);
  }
}

}  // namespace

KVRT_SIMD_CLONES
void rows_attend(const float* q, uint32_t rows, uint32_t qk_dim, uint32_t v_dim, const KvRows<float>& kv,
                 RowsState<float> state, float* scores) {
  rows_attend_impl(q, rows, qk_dim, v_dim, kv, state, scores);
}

void rows_attend(const double* q, uint32_t rows, uint32_t qk_dim, uint32_t v_dim, const KvRows<double>& kv,
                 RowsState<double> state, double* scores) {
  rows_attend_impl(q, rows, qk_dim, v_dim, kv, state, scores);
}

}  // namespace kvrt::executor::kernels
