#pragma once
// The reference model's per-row arithmetic, internal to
// engine/model/. Every function computes one token row from that row's
// inputs alone, in one fixed order of operations, so a row's bits never
// depend on which rows, sequences or threads share its forward() call.
#include <cstddef>
#include <cstdint>
#include <span>

#include "services/executor/kv_view.hpp"

namespace kvrt::model::kernels {

// y = x W for one row: y[o] = sum_{i = 0, 1, ..., in-1} x[i] * w[i * out + o],
// every output accumulated from 0 in increasing i (W input-major,
// model_weights.hpp). Vectorised across outputs only, never across i.
void project(const float* x, uint32_t in, const float* w, uint32_t out, float* y);

// y = x / sqrt(mean(x^2) + eps) * gain, the sum of squares in increasing
// index order. y may alias x.
void rms_norm(const float* x, const float* gain, uint32_t n, float* y);

// cos and sin of position * inv_freq[i] for every i, computed in binary64
// and rounded once to binary32.
void rope_table(uint64_t position, std::span<const double> inv_freq, float* cos_out, float* sin_out);
// Rotate-half RoPE of `heads` heads of head_dim lanes, in place: the pair
// (x_i, x_{i + d/2}) -> (x_i cos_i - x_{i+d/2} sin_i, x_{i+d/2} cos_i + x_i sin_i).
void rope_rotate(float* v, uint32_t heads, uint32_t head_dim, const float* cos, const float* sin);

// Narrows one token row of `heads` K (or V) heads, src = [heads][head_dim]
// binary32, into the storage dtype of `tensor` (round to nearest even,
// executor/scalar_convert.hpp) at (slot, row). `writable_base` is the
// writable address of tensor.base (ModelKvCache::writable_k / writable_v).
void store_heads(const executor::KvTensorView& tensor, std::byte* writable_base, uint64_t slot, uint64_t row,
                 uint32_t heads, const float* src);

}  // namespace kvrt::model::kernels
