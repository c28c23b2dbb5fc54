#include "engine/model/model_kernels.hpp"

#include <cmath>
#include <cstring>

#include "services/executor/scalar_convert.hpp"
#include "services/executor/simd.hpp"
#include "engine/model/model_weights.hpp"

namespace kvrt::model::kernels {
namespace {

// Outputs per register block of project() [scalars]: 32 binary32
// accumulators are 4 AVX2 (8 SSE) registers, which stay in registers across
// the whole i loop, so each step costs loads of W and one broadcast of x[i].
constexpr uint32_t kOutputBlock = 32;

}  // namespace

// Both ISA clones (KVRT_SIMD_CLONES: x86-64-v3 and baseline) give every
// output the same sequence of operations whichever rows are in the batch;
// the v3 clone may fuse a multiply-add, the same way for every row, and a
// process uses one clone throughout.
KVRT_SIMD_CLONES
void project(const float* x, uint32_t in, const float* w, uint32_t out, float* y) {
  uint32_t o0 = 0;
  for (; o0 + kOutputBlock <= out; o0 += kOutputBlock) {
    float acc[kOutputBlock];
    for (uint32_t k = 0; k < kOutputBlock; ++k) acc[k] = 0.0f;
    const float* col = w + o0;
    for (uint32_t i = 0; i < in; ++i) {
      const float xi = x[i];
      const float* wi = col + uint64_t{i} * out;
      for (uint32_t k = 0; k < kOutputBlock; ++k) acc[k] += xi * wi[k];
    }
    for (uint32_t k = 0; k < kOutputBlock; ++k) y[o0 + k] = acc[k];
  }
  // The last out mod 32 outputs: the same per-output order, one at a time.
  for (; o0 < out; ++o0) {
    float acc = 0.0f;
    for (uint32_t i = 0; i < in; ++i) acc += x[i] * w[uint64_t{i} * out + o0];
    y[o0] = acc;
  }
}

void rms_norm(const float* x, const float* gain, uint32_t n, float* y) {
  float sum = 0.0f;
  for (uint32_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / float(n) + kRmsNormEpsilon);
  for (uint32_t i = 0; i < n; ++i) y[i] = x[i] * inv * gain[i];
}

void rope_table(uint64_t position, std::span<const double> inv_freq, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double angle = double(position) * inv_freq[i];
    cos_out[i] = float(std::cos(angle));
    sin_out[i] = float(std::sin(angle));
  }
}

void rope_rotate(float* v, uint32_t heads, uint32_t head_dim, const float* cos, const float* sin) {
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < heads; ++h) {
    float* a = v + uint64_t{h} * head_dim;
    float* b = a + half;
    for (uint32_t i = 0; i < half; ++i) {
      const float lo = a[i], hi = b[i];
      a[i] = lo * cos[i] - hi * sin[i];
      b[i] = hi * cos[i] + lo * sin[i];
    }
  }
}

void store_heads(const executor::KvTensorView& t, std::byte* writable_base, uint64_t slot, uint64_t row, uint32_t heads,
                 const float* src) {
  const uint32_t b = t.scalar_bytes();
  for (uint32_t h = 0; h < heads; ++h) {
    std::byte* dst = writable_base + (slot * t.slot_stride + row * t.token_stride + uint64_t{h} * t.head_stride) * b;
    const float* lanes = src + uint64_t{h} * t.head_dim;
    if (t.lane_stride == 1) {
      executor::narrow_scalars(t.dtype, lanes, t.head_dim, dst);
    } else {
      for (uint32_t x = 0; x < t.head_dim; ++x)
        executor::narrow_scalars(t.dtype, lanes + x, 1, dst + uint64_t{x} * t.lane_stride * b);
    }
  }
}

}  // namespace kvrt::model::kernels
