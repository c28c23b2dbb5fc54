// SHA-256 compression on the x86 SHA extensions. The register layout is the
// one the instructions want: state0 = (A, B, E, F), state1 = (C, D, G, H);
// sha256rnds2 performs two rounds, so four message words take two calls.
// The message schedule W[16..63] is built four words at a time with
// sha256msg1 / sha256msg2 (FIPS 180-4, section 6.2.2 step 1).
#include "services/prefix/sha256_compress.hpp"

#include <cpuid.h>
#include <immintrin.h>

namespace kvrt::sha256x {

namespace {

alignas(16) constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define KVRT_SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))
#define KVRT_SHA_INLINE __attribute__((target("sha,sse4.1,ssse3"), always_inline)) inline

struct Lanes {
  __m128i abef, cdgh;
};

KVRT_SHA_INLINE Lanes load_state(const State& s) {
  __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&s.h[0]));
  __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&s.h[4]));
  abcd = _mm_shuffle_epi32(abcd, 0xB1);  // (B, A, D, C) in memory order
  efgh = _mm_shuffle_epi32(efgh, 0x1B);  // (H, G, F, E)
  return Lanes{_mm_alignr_epi8(abcd, efgh, 8), _mm_blend_epi16(efgh, abcd, 0xF0)};
}

KVRT_SHA_INLINE void store_state(const Lanes& l, State& s) {
  const __m128i feba = _mm_shuffle_epi32(l.abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(l.cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&s.h[0]), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&s.h[4]), _mm_alignr_epi8(dchg, feba, 8));
}

// The 16 message words of a block, byte-swapped to big-endian word order.
KVRT_SHA_INLINE void load_message(const uint8_t* block, __m128i w[4]) {
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  for (int i = 0; i < 4; ++i)
    w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i)), swap);
}

// Four rounds of group r (rounds 4r .. 4r+3), then the schedule words of
// group r + 4 into w[r % 4].
KVRT_SHA_INLINE void four_rounds(Lanes& l, __m128i w[4], int r) {
  __m128i x = _mm_add_epi32(w[r & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(&kRoundConstants[4 * r])));
  l.cdgh = _mm_sha256rnds2_epu32(l.cdgh, l.abef, x);
  x = _mm_shuffle_epi32(x, 0x0E);
  l.abef = _mm_sha256rnds2_epu32(l.abef, l.cdgh, x);
  if (r < 12) {
    __m128i t = _mm_sha256msg1_epu32(w[r & 3], w[(r + 1) & 3]);
    t = _mm_add_epi32(t, _mm_alignr_epi8(w[(r + 3) & 3], w[(r + 2) & 3], 4));
    w[r & 3] = _mm_sha256msg2_epu32(t, w[(r + 3) & 3]);
  }
}

KVRT_SHA_INLINE void compress_one(Lanes& l, const uint8_t* block) {
  __m128i w[4];
  load_message(block, w);
  const Lanes start = l;
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) four_rounds(l, w, r);
  l.abef = _mm_add_epi32(l.abef, start.abef);
  l.cdgh = _mm_add_epi32(l.cdgh, start.cdgh);
}

}  // namespace

bool sha_ni_available() {
  // CPUID itself rather than __builtin_cpu_supports, whose feature names
  // differ between compilers (clang 14 knows no "sha").
  static const bool available = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    const bool ssse3 = (ecx & bit_SSSE3) != 0, sse41 = (ecx & bit_SSE4_1) != 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    return ssse3 && sse41 && (ebx & bit_SHA) != 0;
  }();
  return available;
}

KVRT_SHA_TARGET void compress(State& state, const uint8_t* data, size_t blocks) {
  Lanes l = load_state(state);
  for (size_t b = 0; b < blocks; ++b) compress_one(l, data + 64 * b);
  store_state(l, state);
}

KVRT_SHA_TARGET void compress_pair(State& a, const uint8_t* a_block, State& b, const uint8_t* b_block) {
  Lanes la = load_state(a), lb = load_state(b);
  __m128i wa[4], wb[4];
  load_message(a_block, wa);
  load_message(b_block, wb);
  const Lanes sa = la, sb = lb;
  // The two dependency chains are independent: issuing them round by round
  // keeps both SHA units busy where one chain alone waits on rnds2 latency.
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    four_rounds(la, wa, r);
    four_rounds(lb, wb, r);
  }
  la.abef = _mm_add_epi32(la.abef, sa.abef);
  la.cdgh = _mm_add_epi32(la.cdgh, sa.cdgh);
  lb.abef = _mm_add_epi32(lb.abef, sb.abef);
  lb.cdgh = _mm_add_epi32(lb.cdgh, sb.cdgh);
  store_state(la, a);
  store_state(lb, b);
}

void store_digest(const State& s, uint8_t out[32]) {
  for (int k = 0; k < 8; ++k) {
    out[4 * k] = static_cast<uint8_t>(s.h[k] >> 24);
    out[4 * k + 1] = static_cast<uint8_t>(s.h[k] >> 16);
    out[4 * k + 2] = static_cast<uint8_t>(s.h[k] >> 8);
    out[4 * k + 3] = static_cast<uint8_t>(s.h[k]);
  }
}

}  // namespace kvrt::sha256x
