#pragma once
// Storage dtypes of K/V rows (FP32, FP16, BF16 per the layout manifest's
// k_dtype / v_dtype, 0x01A) and their conversions, written by hand so
// that the result never depends on F16C or AVX512-BF16 being present.
//
//   fp16 (IEEE binary16): 1 sign, 5 exponent (bias 15), 10 fraction bits.
//   bf16 (bfloat16):      1 sign, 8 exponent (bias 127), 7 fraction bits,
//                         i.e. the upper half of a binary32.
//
// Widening (to binary32 or binary64) is exact for both formats. Narrowing from
// binary32 rounds to nearest, ties to even, overflows to infinity, keeps
// subnormals, and keeps a NaN a quiet NaN of the same sign. Tests check fp16
// against the compiler's _Float16 conversions over every binary16 value and
// bf16 against a brute-force nearest-neighbour search.
//
// Bulk widening (widen_scalars, widen_rows) runs eight lanes at a time and
// gives every lane exactly the bits fp16_to_float / bf16_to_float give it, on
// every host: portably with the same bit operations on vector lanes, and on
// x86-64-v3 hosts for fp16 with F16C's vcvtph2ps plus a fix-up, because
// vcvtph2ps quiets a signalling NaN (fp16 0x7c01 becomes 0x7fc02000, where
// fp16_to_float keeps 0x7f802000). The executor widens a window's rows a
// whole run at a time (widen_rows): one call per kernel block and head
// instead of one per row. tests/executor_bitwise_test.cpp checks all 65,536
// patterns of both formats against the scalar functions.
#include <cstdint>
#include <cstring>
#include <span>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::executor {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// binary16 -> binary32, exact.
inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  // Normal: re-bias the exponent (127 - 15 = 112) and widen the fraction.
  const uint32_t normal = (magnitude << 13) + (112u << 23);
  // Inf/NaN: all-ones exponent, fraction widened (a NaN stays a NaN).
  const uint32_t special = (magnitude << 13) | 0x7f800000u;
  // Subnormal (and zero): fraction * 2^-24, exact in binary32.
  const uint32_t subnormal = float_bits(float(magnitude) * 5.9604644775390625e-8f);
  const uint32_t bits = magnitude >= 0x7c00u ? special : (magnitude >= 0x0400u ? normal : subnormal);
  return bits_float(sign | bits);
}

// binary32 -> binary16, round to nearest even.
inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  // quiet NaN
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520: rounds to infinity
  if (magnitude < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to an integer.
    // Adding 0.5 (as 2^-1 in units of 2^-24) via the float shifter 2^-1 * ...
    // is avoided; instead shift the 24-bit significand with RNE by hand.
    if (magnitude < 0x33000000u) return sign;   // < 2^-25: rounds to zero (2^-25 itself ties to even 0)
    const uint32_t exponent = magnitude >> 23;  // 102..112
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24: to units of 2^-24
    const uint32_t kept = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
    return uint16_t(sign | rounded);  // a carry into 0x400 is the smallest normal, correctly
  }
  // Normal: drop 13 fraction bits with RNE; a carry may bump the exponent.
  const uint32_t rebias = magnitude - (112u << 23);
  const uint32_t rounded = rebias + 0x0fffu + ((rebias >> 13) & 1u);
  return uint16_t(sign | (rounded >> 13));
}

inline float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// binary32 -> bfloat16, round to nearest even.
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN, sign kept
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // overflow to inf is the correct RNE result
  return uint16_t(rounded >> 16);
}

// The storage dtypes the executor reads; fp8 and int8 need a quantisation
// schema it does not implement (executor_unsupported_dtype).
Status check_storage_dtype(ScalarType dtype, const char* field);

// Widens n scalars of a storage dtype, `stride` scalars apart, into dst.
void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, float* dst);
void widen_scalars(ScalarType dtype, const void* src, std::ptrdiff_t stride, std::size_t n, double* dst);
// Widens `rows` rows of `lanes` scalars into dst[rows][lanes] (contiguous):
// row i starts `row_stride` scalars after row i - 1, its lanes are
// `lane_stride` scalars apart. Rows that follow each other in memory
// (row_stride = lanes, lane_stride = 1) are widened as one run.
void widen_rows(ScalarType dtype, const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride,
                std::size_t rows, std::size_t lanes, float* dst);
void widen_rows(ScalarType dtype, const void* src, std::ptrdiff_t row_stride, std::ptrdiff_t lane_stride,
                std::size_t rows, std::size_t lanes, double* dst);
// Narrows n binary32 values into contiguous storage of `dtype` (RNE).
void narrow_scalars(ScalarType dtype, const float* src, std::size_t n, void* dst);
// One scalar of storage, widened exactly (reference paths).
double load_scalar(ScalarType dtype, const void* src);

}  // namespace kvrt::executor
