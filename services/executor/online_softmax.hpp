#pragma once
// The partition state of one query row and its exact merge (spec 0x0BA).
//
// For the keys K_p of one partition and one query row, with scores s_i:
//   m_p = max_i s_i,   l_p = sum_i e^(s_i - m_p),   u_p = sum_i e^(s_i - m_p) v_i,
// and valid_p = |K_p| counts the keys. Two states of disjoint partitions merge
// exactly into the state of their union:
//   M = max(m_a, m_b),  l = l_a e^(m_a - M) + l_b e^(m_b - M),  u likewise,
// and the row's output is O = u / l, its LSE = m + log l (natural log). The
// Hydragen coordinates of a state are (O_p, LSE_p) = (u_p / l_p, m_p + log l_p)
// and merge as O = sum_p e^(LSE_p - LSE*) O_p / sum_p e^(LSE_p - LSE*) with
// LSE* = max_p LSE_p. Normalised outputs are never averaged.
//
// Empty partition: valid = 0 is a two-sided identity (merge(e, s) = s,
// merge(s, e) = s, merge(e, e) = e). Its m, l, u are never read: every merge
// branches on `valid` first, so no expression of the form e^(-inf - -inf)
// is ever evaluated. Finalising an empty state is a kvrt bug (an attention row
// over no key has no value) and asserts.
//
// Any non-empty state has l >= 1, because the maximal key contributes e^0.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt::executor {

// Mutable view of one row's state; u has v_dim lanes.
template <class T>
struct StateRef {
  uint64_t* valid;  // [keys]
  T* m;
  T* l;
  T* u;
};

// A block of rows' states, struct-of-arrays (ChunkAttention's partial buffer
// layout: attns [rows][d_v] plus maxsums [2][rows]).
template <class T>
struct PartialStates {
  uint32_t rows = 0;
  uint32_t v_dim = 0;           // d_v [lanes]
  std::vector<uint64_t> valid;  // [rows]
  std::vector<T> m;             // [rows]
  std::vector<T> l;             // [rows]
  std::vector<T> u;             // [rows][v_dim]

  void reset(uint32_t row_count, uint32_t lanes) {
    rows = row_count;
    v_dim = lanes;
    valid.assign(rows, 0);
    m.assign(rows, -std::numeric_limits<T>::infinity());
    l.assign(rows, T(0));
    u.assign(std::size_t{rows} * lanes, T(0));
  }
  StateRef<T> row(uint32_t r) { return StateRef<T>{&valid[r], &m[r], &l[r], &u[std::size_t{r} * v_dim]}; }
};

// dst <- merge(dst, src) over v_dim lanes.
template <class T>
void merge_state(StateRef<T> dst, uint64_t src_valid, T src_m, T src_l, const T* src_u, uint32_t v_dim) {
  if (src_valid == 0) return;  // right identity
  if (*dst.valid == 0) {       // left identity
    *dst.valid = src_valid;
    *dst.m = src_m;
    *dst.l = src_l;
    for (uint32_t x = 0; x < v_dim; ++x) dst.u[x] = src_u[x];
    return;
  }
  const T M = src_m > *dst.m ? src_m : *dst.m;
  const T a = std::exp(*dst.m - M);  // both finite: both states are valid
  const T b = std::exp(src_m - M);
  for (uint32_t x = 0; x < v_dim; ++x) dst.u[x] = dst.u[x] * a + src_u[x] * b;
  *dst.l = *dst.l * a + src_l * b;
  *dst.m = M;
  *dst.valid += src_valid;
}

// out[x] = u[x] / l; *lse = m + log l (when lse is non-null).
template <class T>
void finalize_state(uint64_t valid, T m, T l, const T* u, uint32_t v_dim, T* out, T* lse) {
  KVRT_ASSERT(valid > 0 && l >= T(1), "finalising an empty attention state");
  const T inv = T(1) / l;
  for (uint32_t x = 0; x < v_dim; ++x) out[x] = u[x] * inv;
  if (lse != nullptr) *lse = m + std::log(l);
}

// Hydragen's merge over `count` partitions in (O, LSE) coordinates. Partitions
// with valid[p] == 0 are identities and skipped by the branch. Writes the
// merged output and LSE; returns the merged key count (0: every partition was
// empty and nothing was written).
template <class T>
uint64_t merge_lse(uint32_t count, const T* const* outputs, const T* lses, const uint64_t* valid, uint32_t v_dim,
                   T* out, T* lse) {
  T best = -std::numeric_limits<T>::infinity();
  uint64_t keys = 0;
  for (uint32_t p = 0; p < count; ++p)
    if (valid[p] != 0) {
      best = keys == 0 || lses[p] > best ? lses[p] : best;
      keys += valid[p];
    }
  if (keys == 0) return 0;
  T mass = 0;
  for (uint32_t x = 0; x < v_dim; ++x) out[x] = 0;
  for (uint32_t p = 0; p < count; ++p) {
    if (valid[p] == 0) continue;
    const T w = std::exp(lses[p] - best);
    mass += w;
    for (uint32_t x = 0; x < v_dim; ++x) out[x] += w * outputs[p][x];
  }
  const T inv = T(1) / mass;
  for (uint32_t x = 0; x < v_dim; ++x) out[x] *= inv;
  if (lse != nullptr) *lse = best + std::log(mass);
  return keys;
}

}  // namespace kvrt::executor
