#include "services/executor/scalar_convert.hpp"

#include <string>

#include "services/executor/simd.hpp"

// GCC on x86-64: an F16C version of the fp16 widening beside the portable
// one, chosen at load time (see widen_fp16_rows below).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KVRT_F16C_VERSION 1
#include <immintrin.h>
#endif

namespace kvrt::executor {

Status check_storage_dtype(ScalarType dtype, const char* field) {
  switch (dtype) {
    case ScalarType::fp32:
    case ScalarType::fp16:
    case ScalarType::bf16:
      return Status::success();
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  return make_error(ErrorCode::executor_unsupported_dtype,
                    "storage dtype " + std::string(to_string(dtype)) +
                        " needs a quantisation schema the executor does not implement (fp32, fp16, bf16 only)",
                    field);
}

namespace {

using simd::Vec;
using Lanes32 = simd::VecOf<float>::itype;                    // 8 x int32
typedef uint32_t ULanes32 __attribute__((vector_size(32)));   // 8 x uint32
typedef uint16_t Storage16 __attribute__((vector_size(16)));  // 8 x binary16 / bfloat16
constexpr std::size_t kGroup = 8;                             // lanes per vector step [scalars]

// fp16_to_float on eight lanes: the same three candidates and the same
// selection, so each lane's bits equal the scalar function's
// (tests/executor_bitwise_test.cpp compares all 65,536 patterns, NaN
// payloads included).
KVRT_INLINE Vec<float> fp16_lanes_to_float(Storage16 h) {
  const ULanes32 x = __builtin_convertvector(h, ULanes32);
  const ULanes32 sign = (x & 0x8000u) << 16;
  const Lanes32 magnitude = (Lanes32)(x & 0x7fffu);  // < 2^15: signed compares are exact
  const Lanes32 normal = (magnitude << 13) + (112 << 23);
  const Lanes32 special = (magnitude << 13) | 0x7f800000;
  const Lanes32 subnormal = (Lanes32)(__builtin_convertvector(magnitude, Vec<float>) * 5.9604644775390625e-8f);
  const Lanes32 bits = magnitude >= 0x7c00 ? special : (magnitude >= 0x0400 ? normal : subnormal);
  return (Vec<float>)(sign | (ULanes32)bits);
}

// One row of `n` lanes, `stride` scalars apart, as binary32. bf16 is a
// shift, which GCC vectorises from the scalar loop (32-byte loads, as the
// per-row loop did); fp16's selects it does not, so fp16 takes eight lanes
// at a time explicitly (a strided row is gathered into a vector first), then
// the scalar function for the last n % 8.
template <ScalarType D>
KVRT_INLINE void widen_row(const void* src, std::ptrdiff_t stride, std::size_t n, float* dst) {
  if constexpr (D == ScalarType::fp32) {
    const float* s = static_cast<const float*>(src);
    if (stride == 1)
      std::memcpy(dst, s, n * sizeof(float));
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = s[std::ptrdiff_t(i) * stride];
  } else if constexpr (D == ScalarType::bf16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    if (stride == 1)
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[std::ptrdiff_t(i) * stride]);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    std::size_t i = 0;
    for (; i + kGroup <= n; i += kGroup) {
      Storage16 h;
      if (stride == 1)
        std::memcpy(&h, s + i, sizeof h);
      else
        for (std::size_t j = 0; j < kGroup; ++j) h[j] = s[std::ptrdiff_t(i + j) * stride];
      simd::store(dst + i, fp16_lanes_to_float(h));
    }
    for (; i < n; ++i) dst[i] = fp16_to_float(s[std::ptrdiff_t(i) * stride]);
  }
}

template <ScalarType D>
KVRT_INLINE void widen_rows_as(const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride, std::size_t rows,
                               std::size_t lanes, float* dst) {
  if (lane_stride == 1 && row_stride == std::ptrdiff_t(lanes)) {  // one contiguous run
    widen_row<D>(src, 1, rows * lanes, dst);
    return;
  }
  const std::byte* s = static_cast<const std::byte*>(src);
  const std::ptrdiff_t row_bytes = row_stride * (D == ScalarType::fp32 ? 4 : 2);
  for (std::size_t r = 0; r < rows; ++r)
    widen_row<D>(s + std::ptrdiff_t(r) * row_bytes, lane_stride, lanes, dst + r * lanes);
}

// fp16 runs. Under x86-64-v3 (function multi-versioning, chosen at load
// time like the KVRT_SIMD_CLONES kernels) F16C converts eight lanes in one
// instruction; vcvtph2ps differs from fp16_to_float only on a signalling
// NaN, which it quiets (sets bit 22), so bit 22 of every NaN lane is put
// back to the input's fraction bit 9. Elsewhere, and for strided lanes, the
// portable lanes above.
#ifdef KVRT_F16C_VERSION
__attribute__((target("default")))
#endif
void widen_fp16_rows(const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride, std::size_t rows,
                     std::size_t lanes, float* dst) {
  widen_rows_as<ScalarType::fp16>(src, row_stride, lane_stride, rows, lanes, dst);
}

#ifdef KVRT_F16C_VERSION
__attribute__((target("arch=x86-64-v3"))) void widen_fp16_rows(const void* src, std::ptrdiff_t row_stride,
                                                               std::ptrdiff_t lane_stride, std::size_t rows,
                                                               std::size_t lanes, float* dst) {
  if (lane_stride != 1) return widen_rows_as<ScalarType::fp16>(src, row_stride, lane_stride, rows, lanes, dst);
  if (row_stride == std::ptrdiff_t(lanes)) {  // one contiguous run
    lanes *= rows;
    rows = 1;
  }
  const __m256i quiet_bit = _mm256_set1_epi32(0x00400000);  // binary32 fraction bit 22
  for (std::size_t r = 0; r < rows; ++r) {
    const uint16_t* s = static_cast<const uint16_t*>(src) + std::ptrdiff_t(r) * row_stride;
    float* d = dst + r * lanes;
    std::size_t i = 0;
    for (; i + kGroup <= lanes; i += kGroup) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m256 f = _mm256_cvtph_ps(h);
      // Bit 22 to clear: NaN lanes whose input fraction bit 9 (shifted to 22) is 0.
      const __m256i from_input = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 13);
      const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
      const __m256i clear = _mm256_and_si256(nan, _mm256_andnot_si256(from_input, quiet_bit));
      _mm256_storeu_ps(d + i, _mm256_xor_ps(f, _mm256_castsi256_ps(clear)));
    }
    for (; i < lanes; ++i) d[i] = fp16_to_float(s[i]);
  }
}
#endif

KVRT_INLINE void widen_rows_float(ScalarType dtype, const void* src, std::ptrdiff_t row_stride,
                                  std::ptrdiff_t lane_stride, std::size_t rows, std::size_t lanes, float* dst) {
  switch (dtype) {
    case ScalarType::fp32:
      return widen_rows_as<ScalarType::fp32>(src, row_stride, lane_stride, rows, lanes, dst);
    case ScalarType::fp16:
      return widen_fp16_rows(src, row_stride, lane_stride, rows, lanes, dst);
    case ScalarType::bf16:
      return widen_rows_as<ScalarType::bf16>(src, row_stride, lane_stride, rows, lanes, dst);
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  KVRT_ASSERT(false, "widen_rows on an unchecked dtype " + std::string(to_string(dtype)));
}

// Binary64 (the reference mode): one scalar at a time, exactness over speed.
void widen_row_double(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, double* dst) {
  if (dtype == ScalarType::fp32) {
    const float* s = static_cast<const float*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = double(s[std::ptrdiff_t(i) * stride]);
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dtype == ScalarType::bf16) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = double(bf16_to_float(s[std::ptrdiff_t(i) * stride]));
    return;
  }
  KVRT_ASSERT(dtype == ScalarType::fp16, "widen_scalars on an unchecked dtype " + std::string(to_string(dtype)));
  for (std::size_t i = 0; i < n; ++i) dst[i] = double(fp16_to_float(s[std::ptrdiff_t(i) * stride]));
}

}  // namespace

KVRT_SIMD_CLONES
void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, float* dst) {
  switch (dtype) {
    case ScalarType::fp32:
      return widen_row<ScalarType::fp32>(src, stride, n, dst);
    case ScalarType::bf16:
      return widen_row<ScalarType::bf16>(src, stride, n, dst);
    case ScalarType::fp16:
      return widen_fp16_rows(src, std::ptrdiff_t(n) * stride, stride, 1, n, dst);
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  KVRT_ASSERT(false, "widen_scalars on an unchecked dtype " + std::string(to_string(dtype)));
}

void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, double* dst) {
  widen_row_double(dtype, src, stride, n, dst);
}

KVRT_SIMD_CLONES
void widen_rows(ScalarType dtype, const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride,
                std::size_t rows, std::size_t lanes, float* dst) {
  widen_rows_float(dtype, src, row_stride, lane_stride, rows, lanes, dst);
}

void widen_rows(ScalarType dtype, const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride,
                std::size_t rows, std::size_t lanes, double* dst) {
  const std::byte* s = static_cast<const std::byte*>(src);
  const std::ptrdiff_t row_bytes = row_stride * (dtype == ScalarType::fp32 ? 4 : 2);
  for (std::size_t r = 0; r < rows; ++r)
    widen_row_double(dtype, s + std::ptrdiff_t(r) * row_bytes, lane_stride, lanes, dst + r * lanes);
}

void narrow_scalars(ScalarType dtype, const float* src, std::size_t n, void* dst) {
  switch (dtype) {
    case ScalarType::fp32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case ScalarType::fp16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = float_to_fp16(src[i]);
      return;
    }
    case ScalarType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    }
    case ScalarType::fp8_e4m3:
    case ScalarType::int8:
      break;
  }
  KVRT_ASSERT(false, "narrow_scalars on an unchecked dtype " + std::string(to_string(dtype)));
}

double load_scalar(ScalarType dtype, const void* src) {
  double out = 0;
  widen_row_double(dtype, src, 1, 1, &out);
  return out;
}

}  // namespace kvrt::executor
