#pragma once
// Portable vector helpers for the executor's inner loops: vector code where
// the compiler offers it, a scalar fallback with the same results elsewhere.
//
// Why GCC vector extensions and function multi-versioning rather than global
// -march flags: the binary must run on any x86-64 host (and build on others),
// and a global flag would change every other owner's code generation too. The
// hot entry points carry KVRT_SIMD_CLONES, so GCC emits an x86-64-v3 clone
// (AVX2 + FMA) and a baseline clone and picks one at load time (ifunc). Every
// helper below is always_inline, so it is compiled for whichever clone
// inlines it. On other compilers/targets the macro is empty and the same
// code compiles to the baseline ISA.
//
// Vec<T> is 32 bytes: 8 floats or 4 doubles (one ymm register under v3, two
// xmm registers in the baseline clone). Loads and stores go through memcpy,
// so no pointer needs any alignment.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KVRT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KVRT_SIMD_CLONES
#endif
#define KVRT_INLINE inline __attribute__((always_inline))

// Every function here is always inlined into its caller's clone, so passing a
// 32-byte vector by value never crosses a call boundary whose ABI the
// baseline clone would disagree on; GCC's -Wpsabi note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvrt::executor::simd {

template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef int32_t itype __attribute__((vector_size(32)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef int64_t itype __attribute__((vector_size(32)));
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
inline constexpr int kLanes = static_cast<int>(32 / sizeof(T));  // W [scalars per Vec]

template <class T>
KVRT_INLINE Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
KVRT_INLINE void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
KVRT_INLINE Vec<T> splat(T x) {
  return Vec<T>{} + x;
}
template <class V>
using LaneOf = std::remove_cvref_t<decltype(std::declval<V>()[0])>;

template <class V>
KVRT_INLINE LaneOf<V> hsum(V v) {
  // Pairwise in a fixed order, so a result never depends on the clone.
  using T = LaneOf<V>;
  constexpr int lanes = int(sizeof(V) / sizeof(T));
  T x[lanes];
  std::memcpy(x, &v, sizeof v);
  for (int w = lanes / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) x[i] += x[i + w];
  return x[0];
}
template <class V>
KVRT_INLINE LaneOf<V> hmax(V v) {
  using T = LaneOf<V>;
  constexpr int lanes = int(sizeof(V) / sizeof(T));
  T x[lanes];
  std::memcpy(x, &v, sizeof v);
  T m = x[0];
  for (int i = 1; i < lanes; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
template <class V>
KVRT_INLINE V vmax(V a, V b) {
  return a > b ? a : b;
}

// reduce_lanes(a)[i] = hsum(a[i]) for W accumulators: one vector of W dot
// products. For 8 floats this is the transposing reduction (three rounds of
// pairwise horizontal adds, then the two 128-bit halves): about 20
// instructions for 8 sums instead of 8 separate horizontal sums.
KVRT_INLINE Vec<float> reduce_lanes(const Vec<float>* a) {
  using V = Vec<float>;
  // __builtin_shufflevector: the spelling GCC (12 and later) and clang share.
  const auto hadd = [](V x, V y) {
    return __builtin_shufflevector(x, y, 0, 2, 8, 10, 4, 6, 12, 14) +
           __builtin_shufflevector(x, y, 1, 3, 9, 11, 5, 7, 13, 15);
  };
  const V t0 = hadd(a[0], a[1]), t1 = hadd(a[2], a[3]), t2 = hadd(a[4], a[5]), t3 = hadd(a[6], a[7]);
  // u0 lanes: [s0 s1 s2 s3 | s0' s1' s2' s3'] partial sums of a0..a3 per half.
  const V u0 = hadd(t0, t1), u1 = hadd(t2, t3);
  return __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
}
KVRT_INLINE Vec<double> reduce_lanes(const Vec<double>* a) {
  Vec<double> out;
  for (int i = 0; i < 4; ++i) out[i] = hsum(a[i]);
  return out;
}

// e^x for x <= 0 in single precision (the only arguments the online softmax
// produces: a score minus a running maximum). Cephes expf: x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two for an exact reduction), a degree-6
// polynomial for e^r, and 2^n assembled in the exponent bits. Relative error
// below 2 ulp on [-87.3, 0]; arguments below -87.3 (including -inf, a masked
// score) return exactly 0, so a masked key contributes no mass.
KVRT_INLINE Vec<float> exp_nonpositive(Vec<float> x) {
  using V = Vec<float>;
  using I = VecOf<float>::itype;
  const V lo = splat(-87.3f);
  const I underflow = x < lo;
  x = vmax(x, lo);
  // Round x*log2(e) to the nearest integer with the 1.5 * 2^23 shifter.
  const V shifter = splat(12582912.0f);
  const V t = x * splat(1.44269504088896341f) + shifter;
  const V n = t - shifter;
  const I n_int = (I)t - (I)shifter;
  V r = x - n * splat(0.693359375f);
  r = r - n * splat(-2.12194440e-4f);
  V p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  p = p * (r * r) + r + splat(1.0f);
  const V scale = (V)((n_int + 127) << 23);
  const V result = p * scale;
  return underflow ? V{} : result;
}
// Double precision is the reference mode: exactness over speed, so libm.
KVRT_INLINE Vec<double> exp_nonpositive(Vec<double> x) {
  double lanes[4];
  std::memcpy(lanes, &x, sizeof x);
  for (double& v : lanes) v = std::exp(v);
  Vec<double> out;
  std::memcpy(&out, lanes, sizeof out);
  return out;
}
KVRT_INLINE float exp_scalar(float x) { return exp_nonpositive(splat(x))[0]; }
KVRT_INLINE double exp_scalar(double x) { return std::exp(x); }

}  // namespace kvrt::executor::simd
