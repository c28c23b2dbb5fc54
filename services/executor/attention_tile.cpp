// Tile kernel (attention_kernels.hpp): many query rows against one window,
// as two matrix products around a column-wise online softmax.
//
//   S^T[t][r] = k_t . q_r           K (n x d_qk) times Q^T (d_qk x m_pad)
//   P^T = exp(S^T - m_new[r])       per column r, vectorised across rows
//   acc[r][:] += sum_t P^T[t][r] v_t
//
// Both products use register tiles of 12 accumulators (W = 8 floats under
// AVX2): scores take 6 key rows x 2W query columns, or 12 key rows x W
// columns for the last W columns when m_pad is an odd number of vectors;
// the output takes up to 6 query rows x 2W lanes of d_v. Per step, vector
// loads and broadcasts feed the FMAs, the shape of a classic broadcast GEMM
// micro-kernel, so the shared-prefix path runs at the machine's
// matrix-multiply rate rather than its bandwidth. Key rows past the end of a
// score tile repeat the last real row and are never stored.
//
// Padding. Query rows are padded to whole vectors (m_pad = W-multiple, not
// 2W), and the output tile is as tall as the rows left (1..6), so decode's
// G rows per K/V head (2 in the reference model) compute 8 score columns,
// not 16, and 2 output rows, not 6.
//
// Batch invariance (engine/model/reference_model.cpp relies on it): every
// value of column r is the same chain of lane-wise operations whatever m_pad
// or the tile shape is: the score is 0 + k[0]q[0] + k[1]q[1] + ... in lane
// order of x (one multiply-add per step, the same expression in every tile
// shape, so the compiler contracts it the same way), the maximum, exp and
// column sum run over t in order, and acc[r] += p[t][r] v_t runs over t in
// order per row. Which columns share a vector or which rows share a tile
// never enters a row's arithmetic; tests/executor_bitwise_test.cpp compares
// rows computed alone against the same rows inside wide tiles, bit for bit.
#include <algorithm>
#include <limits>

#include "services/executor/attention_kernels.hpp"
#include "services/executor/simd.hpp"

namespace kvrt::executor::kernels {
namespace {

using simd::kLanes;
using simd::load;
using simd::splat;
using simd::store;
using simd::Vec;

constexpr uint32_t kTileRows = 6;       // output tile height [query rows]
constexpr uint32_t kAccumulators = 12;  // vector accumulators of every tile

// St[t][c0 .. c0+C*W) for t in [t0, t0 + 12/C): 12/C key rows times C vectors
// of query columns (C = 2: 6 x 2W, C = 1: 12 x W).
template <class T, int C>
KVRT_INLINE void scores_tile(const T* const* a, uint32_t dk, const T* qt, uint32_t m_pad, uint32_t c0, T* st,
                             uint32_t rows_out) {
  constexpr int W = kLanes<T>;
  constexpr uint32_t R = kAccumulators / C;
  Vec<T> c[R][C];
  for (uint32_t i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) c[i][j] = Vec<T>{};
  for (uint32_t x = 0; x < dk; ++x) {
    Vec<T> b[C];
    for (int j = 0; j < C; ++j) b[j] = load(qt + uint64_t{x} * m_pad + c0 + j * W);
#pragma GCC unroll 12
    for (uint32_t i = 0; i < R; ++i) {
      const Vec<T> ai = splat(a[i][x]);
      for (int j = 0; j < C; ++j) c[i][j] += ai * b[j];
    }
  }
  for (uint32_t i = 0; i < rows_out; ++i)
    for (int j = 0; j < C; ++j) store(st + uint64_t{i} * m_pad + c0 + j * W, c[i][j]);
}

// S^T for columns [c_begin, c_end) in tiles of C vectors (a multiple of C*W).
template <class T, int C>
KVRT_INLINE void scores_columns(const KvRows<T>& kv, uint32_t dk, const T* qt, uint32_t m_pad, uint32_t c_begin,
                                uint32_t c_end, T* pt) {
  constexpr uint32_t R = kAccumulators / C;
  const uint32_t n = kv.n;
  for (uint32_t t0 = 0; t0 < n; t0 += R) {
    const uint32_t tr = std::min(R, n - t0);
    const T* a[R];
    for (uint32_t i = 0; i < R; ++i) a[i] = kv.k[t0 + std::min(i, tr - 1)];
    for (uint32_t c0 = c_begin; c0 < c_end; c0 += C * kLanes<T>)
      scores_tile<T, C>(a, dk, qt, m_pad, c0, pt + uint64_t{t0} * m_pad, tr);
  }
}

// acc[r0 + i][x0 .. x0+2W) += sum_t P^T[t][r0 + i] v_t[x0 ..] for R rows.
template <class T, uint32_t R>
KVRT_INLINE void output_tile(uint32_t r0, const T* pt, uint32_t m_pad, const T* const* v, uint32_t n, uint32_t x0,
                             T* acc, uint32_t dv) {
  constexpr int W = kLanes<T>;
  Vec<T> c[R][2];
  for (uint32_t i = 0; i < R; ++i) {
    c[i][0] = load(acc + uint64_t{r0 + i} * dv + x0);
    c[i][1] = load(acc + uint64_t{r0 + i} * dv + x0 + W);
  }
  for (uint32_t t = 0; t < n; ++t) {
    const Vec<T> b0 = load(v[t] + x0);
    const Vec<T> b1 = load(v[t] + x0 + W);
    const T* prow = pt + uint64_t{t} * m_pad + r0;
#pragma GCC unroll 6
    for (uint32_t i = 0; i < R; ++i) {
      const Vec<T> ai = splat(prow[i]);
      c[i][0] += ai * b0;
      c[i][1] += ai * b1;
    }
  }
  for (uint32_t i = 0; i < R; ++i) {
    store(acc + uint64_t{r0 + i} * dv + x0, c[i][0]);
    store(acc + uint64_t{r0 + i} * dv + x0 + W, c[i][1]);
  }
}

// acc += P V for the R query rows r0 .. r0 + R - 1, every lane of d_v.
template <class T, uint32_t R>
KVRT_INLINE void output_rows(uint32_t r0, const T* pt, uint32_t m_pad, const KvRows<T>& kv, T* acc, uint32_t dv) {
  constexpr uint32_t W = kLanes<T>;
  const uint32_t n = kv.n;
  uint32_t x0 = 0;
  for (; x0 + 2 * W <= dv; x0 += 2 * W) output_tile<T, R>(r0, pt, m_pad, kv.v, n, x0, acc, dv);
  for (; x0 < dv; ++x0)
    for (uint32_t i = 0; i < R; ++i) {
      T sum = acc[uint64_t{r0 + i} * dv + x0];
      for (uint32_t t = 0; t < n; ++t) sum += pt[uint64_t{t} * m_pad + r0 + i] * kv.v[t][x0];
      acc[uint64_t{r0 + i} * dv + x0] = sum;
    }
}

template <class T>
KVRT_INLINE void tile_attend_impl(const T* qt, uint32_t rows, uint32_t m_pad, uint32_t dk, uint32_t dv,
                                  const KvRows<T>& kv, const uint64_t* key_limit, RowsState<T> st, T* scratch) {
  constexpr int W = kLanes<T>;
  const uint32_t n = kv.n;
  if (n == 0 || rows == 0) return;
  T* pt = scratch;                             // [n][m_pad] scores, then probabilities
  T* col_max = scratch + uint64_t{n} * m_pad;  // [m_pad]
  T* shift = col_max + m_pad;                  // [m_pad]
  const T neg_inf = -std::numeric_limits<T>::infinity();

  // 1. S^T = K Q^T: pairs of vectors of columns, then a last single vector.
  const uint32_t paired = m_pad / (2 * W) * (2 * W);
  if (paired > 0) scores_columns<T, 2>(kv, dk, qt, m_pad, 0, paired, pt);
  if (paired < m_pad) scores_columns<T, 1>(kv, dk, qt, m_pad, paired, m_pad, pt);
  // 2. Causal mask: key position p is hidden from row r when p >= key_limit[r].
  const uint64_t last = kv.first_position + n;  // one past the window's last position
  if (key_limit != nullptr)
    for (uint32_t r = 0; r < rows; ++r)
      for (uint64_t p = std::max(key_limit[r], kv.first_position); p < last; ++p)
        pt[(p - kv.first_position) * m_pad + r] = neg_inf;
  // 3. Column maxima, vectorised across rows.
  for (uint32_t c0 = 0; c0 < m_pad; c0 += W) {
    Vec<T> mx = splat(neg_inf);
    for (uint32_t t = 0; t < n; ++t) mx = simd::vmax(mx, load(pt + uint64_t{t} * m_pad + c0));
    store(col_max + c0, mx);
  }
  // 4. New maxima and rescale, per row. A row whose every key is masked so
  //    far keeps m = -inf and subtracts 0 instead, so that exp(-inf - 0) = 0
  //    and exp(-inf - -inf) is never formed.
  for (uint32_t r = 0; r < rows; ++r) {
    const uint64_t visible =
        key_limit == nullptr
            ? n
            : (key_limit[r] <= kv.first_position ? 0 : std::min<uint64_t>(n, key_limit[r] - kv.first_position));
    T m_new = col_max[r];
    if (st.valid[r] != 0) {
      m_new = std::max(st.m[r], col_max[r]);
      if (m_new > st.m[r]) {
        const T alpha = simd::exp_scalar(st.m[r] - m_new);
        st.l[r] *= alpha;
        T* acc = st.acc + uint64_t{r} * dv;
        for (uint32_t x = 0; x < dv; ++x) acc[x] *= alpha;
      }
    }
    shift[r] = visible == 0 && st.valid[r] == 0 ? T(0) : m_new;
    if (visible != 0) st.m[r] = m_new;
    st.valid[r] += visible;
  }
  for (uint32_t r = rows; r < m_pad; ++r) shift[r] = T(0);
  // 5. Probabilities and their column sums.
  for (uint32_t c0 = 0; c0 < m_pad; c0 += W) {
    const Vec<T> s = load(shift + c0);
    Vec<T> sum{};
    for (uint32_t t = 0; t < n; ++t) {
      T* cell = pt + uint64_t{t} * m_pad + c0;
      const Vec<T> p = simd::exp_nonpositive(load(cell) - s);
      store(cell, p);
      sum += p;
    }
    store(col_max + c0, sum);  // reuse: column sums
  }
  for (uint32_t r = 0; r < rows; ++r) st.l[r] += col_max[r];
  // 6. acc += P V, in tiles of up to 6 rows, each exactly as tall as the rows it has.
  for (uint32_t r0 = 0; r0 < rows; r0 += kTileRows) {
    switch (std::min(kTileRows, rows - r0)) {
      case 1:
        output_rows<T, 1>(r0, pt, m_pad, kv, st.acc, dv);
        break;
      case 2:
        output_rows<T, 2>(r0, pt, m_pad, kv, st.acc, dv);
        break;
      case 3:
        output_rows<T, 3>(r0, pt, m_pad, kv, st.acc, dv);
        break;
      case 4:
        output_rows<T, 4>(r0, pt, m_pad, kv, st.acc, dv);
        break;
      case 5:
        output_rows<T, 5>(r0, pt, m_pad, kv, st.acc, dv);
        break;
      default:
        output_rows<T, 6>(r0, pt, m_pad, kv, st.acc, dv);
        break;
    }
  }
}

}  // namespace

KVRT_SIMD_CLONES
void tile_attend(const float* qt, uint32_t rows, uint32_t m_pad, uint32_t qk_dim, uint32_t v_dim,
                 const KvRows<float>& kv, const uint64_t* key_limit, RowsState<float> state, float* scratch) {
  tile_attend_impl(qt, rows, m_pad, qk_dim, v_dim, kv, key_limit, state, scratch);
}

void tile_attend(const double* qt, uint32_t rows, uint32_t m_pad, uint32_t qk_dim, uint32_t v_dim,
                 const KvRows<double>& kv, const uint64_t* key_limit, RowsState<double> state, double* scratch) {
  tile_attend_impl(qt, rows, m_pad, qk_dim, v_dim, kv, key_limit, state, scratch);
}

}  // namespace kvrt::executor::kernels
