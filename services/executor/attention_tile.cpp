// Tile kernel (attention_kernels.hpp): many query rows against one window,
// as two matrix products around a column-wise online softmax.
//
//   S^T[t][r] = k_t . q_r           K (n x d_qk) times Q^T (d_qk x m_pad)
//   P^T = exp(S^T - m_new[r])       per column r, vectorised across rows
//   acc[r][:] += sum_t P^T[t][r] v_t
//
// Both products use one 6 x 2W register tile (12 accumulators; W = 8 floats
// under AVX2): per step, 2 vector loads and 6 broadcasts feed 12 FMAs, the
// shape of a classic broadcast GEMM micro-kernel, so the shared-prefix path
// runs at the machine's matrix-multiply rate rather than its bandwidth. Rows
// past the end of a 6-row tile repeat the last real row and are never stored.
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

constexpr uint32_t kTileRows = 6;

// St[t][c0 .. c0+2W) for t in [t0, t0+6): 6 key rows times 2W query columns.
template <class T>
KVRT_INLINE void scores_tile(const T* const* a, uint32_t dk, const T* qt, uint32_t m_pad, uint32_t c0, T* st,
                             uint32_t rows_out) {
  constexpr int W = kLanes<T>;
  Vec<T> c[kTileRows][2];
  for (uint32_t i = 0; i < kTileRows; ++i) c[i][0] = c[i][1] = Vec<T>{};
  for (uint32_t x = 0; x < dk; ++x) {
    const Vec<T> b0 = load(qt + uint64_t{x} * m_pad + c0);
    const Vec<T> b1 = load(qt + uint64_t{x} * m_pad + c0 + W);
#pragma GCC unroll 6
    for (uint32_t i = 0; i < kTileRows; ++i) {
      const Vec<T> ai = splat(a[i][x]);
      c[i][0] += ai * b0;
      c[i][1] += ai * b1;
    }
  }
  for (uint32_t i = 0; i < rows_out; ++i) {
    store(st + uint64_t{i} * m_pad + c0, c[i][0]);
    store(st + uint64_t{i} * m_pad + c0 + W, c[i][1]);
  }
}

// acc[r_i][x0 .. x0+2W) += sum_t P^T[t][r_i] v_t[x0 ..] for 6 rows r_i.
template <class T>
KVRT_INLINE void output_tile(const uint32_t* r, uint32_t rows_out, const T* pt, uint32_t m_pad, const T* const* v,
                             uint32_t n, uint32_t x0, T* acc, uint32_t dv) {
  constexpr int W = kLanes<T>;
  Vec<T> c[kTileRows][2];
  for (uint32_t i = 0; i < kTileRows; ++i) {
    c[i][0] = load(acc + uint64_t{r[i]} * dv + x0);
    c[i][1] = load(acc + uint64_t{r[i]} * dv + x0 + W);
  }
  for (uint32_t t = 0; t < n; ++t) {
    const Vec<T> b0 = load(v[t] + x0);
    const Vec<T> b1 = load(v[t] + x0 + W);
    const T* prow = pt + uint64_t{t} * m_pad;
#pragma GCC unroll 6
    for (uint32_t i = 0; i < kTileRows; ++i) {
      const Vec<T> ai = splat(prow[r[i]]);
      c[i][0] += ai * b0;
      c[i][1] += ai * b1;
    }
  }
  for (uint32_t i = 0; i < rows_out; ++i) {
    store(acc + uint64_t{r[i]} * dv + x0, c[i][0]);
    store(acc + uint64_t{r[i]} * dv + x0 + W, c[i][1]);
  }
}

template <class T>
KVRT_INLINE void tile_attend_impl(const T* qt, uint32_t rows, uint32_t m_pad, uint32_t dk, uint32_t dv,
                                  const KvRows<T>& kv, const uint64_t* key_limit, RowsState<T> st, T* scratch) {
  constexpr int W = kLanes<T>;
  const uint32_t n = kv.n;
  if (n == 0 || rows == 0) return;
  T* pt = scratch;                              // [n][m_pad] scores, then probabilities
  T* col_max = scratch + uint64_t{n} * m_pad;   // [m_pad]
  T* shift = col_max + m_pad;                   // [m_pad]
  const T neg_inf = -std::numeric_limits<T>::infinity();

  // 1. S^T = K Q^T.
  for (uint32_t t0 = 0; t0 < n; t0 += kTileRows) {
    const uint32_t tr = std::min(kTileRows, n - t0);
    const T* a[kTileRows];
    for (uint32_t i = 0; i < kTileRows; ++i) a[i] = kv.k[t0 + std::min(i, tr - 1)];
    for (uint32_t c0 = 0; c0 < m_pad; c0 += 2 * W) scores_tile(a, dk, qt, m_pad, c0, pt + uint64_t{t0} * m_pad, tr);
  }
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
        key_limit == nullptr ? n : (key_limit[r] <= kv.first_position ? 0 : std::min<uint64_t>(n, key_limit[r] - kv.first_position));
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
  // 6. acc += P V.
  for (uint32_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const uint32_t rr = std::min(kTileRows, rows - r0);
    uint32_t idx[kTileRows];
    for (uint32_t i = 0; i < kTileRows; ++i) idx[i] = r0 + std::min(i, rr - 1);
    uint32_t x0 = 0;
    for (; x0 + 2 * W <= dv; x0 += 2 * W) output_tile(idx, rr, pt, m_pad, kv.v, n, x0, st.acc, dv);
    for (; x0 < dv; ++x0)
      for (uint32_t i = 0; i < rr; ++i) {
        T sum = st.acc[uint64_t{idx[i]} * dv + x0];
        for (uint32_t t = 0; t < n; ++t) sum += pt[uint64_t{t} * m_pad + idx[i]] * kv.v[t][x0];
        st.acc[uint64_t{idx[i]} * dv + x0] = sum;
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
