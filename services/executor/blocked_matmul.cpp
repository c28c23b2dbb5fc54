#include "services/executor/blocked_matmul.hpp"

#include <algorithm>
#include <vector>

#include "services/executor/simd.hpp"

namespace kvrt::executor {
namespace {

using simd::load;
using simd::splat;
using simd::store;
using V = simd::Vec<float>;

constexpr uint32_t kMr = 6;     // micro-tile rows
constexpr uint32_t kNr = 16;    // micro-tile columns (two vectors)
constexpr uint32_t kKc = 256;   // K slab [elements]: a 6 x 256 A strip and a 256 x 16 B strip fit L1
constexpr uint32_t kMc = 96;    // rows per parallel block, a multiple of kMr
constexpr uint32_t kNc = 1024;  // columns per packed B panel

// c_tile[6][16] = sum_k a_strip[k][6] * b_strip[k][16].
KVRT_INLINE void micro_kernel(uint32_t kc, const float* ap, const float* bp, float* tile) {
  V c[kMr][2];
  for (uint32_t i = 0; i < kMr; ++i) c[i][0] = c[i][1] = V{};
  for (uint32_t p = 0; p < kc; ++p) {
    const V b0 = load(bp + p * kNr);
    const V b1 = load(bp + p * kNr + 8);
#pragma GCC unroll 6
    for (uint32_t i = 0; i < kMr; ++i) {
      const V ai = splat(ap[p * kMr + i]);
      c[i][0] += ai * b0;
      c[i][1] += ai * b1;
    }
  }
  for (uint32_t i = 0; i < kMr; ++i) {
    store(tile + i * kNr, c[i][0]);
    store(tile + i * kNr + 8, c[i][1]);
  }
}

// One kMc x nc block of C for one K slab.
KVRT_SIMD_CLONES
void block_product(uint32_t mc, uint32_t nc, uint32_t kc, const float* a, uint64_t lda, const float* bpack, float* c,
                   uint64_t ldc, float* apack) {
  const uint32_t strips = (mc + kMr - 1) / kMr;
  for (uint32_t s = 0; s < strips; ++s)
    for (uint32_t p = 0; p < kc; ++p)
      for (uint32_t i = 0; i < kMr; ++i) {
        const uint32_t row = s * kMr + i;
        apack[(uint64_t{s} * kc + p) * kMr + i] = row < mc ? a[uint64_t{row} * lda + p] : 0.0f;
      }
  float tile[kMr * kNr];
  for (uint32_t j = 0; j < nc; j += kNr)
    for (uint32_t s = 0; s < strips; ++s) {
      micro_kernel(kc, apack + uint64_t{s} * kc * kMr, bpack + uint64_t{j} * kc, tile);
      const uint32_t rows = std::min(kMr, mc - s * kMr), cols = std::min(kNr, nc - j);
      for (uint32_t i = 0; i < rows; ++i) {
        float* out = c + uint64_t{s * kMr + i} * ldc + j;
        for (uint32_t x = 0; x < cols; ++x) out[x] += tile[i * kNr + x];
      }
    }
}

}  // namespace

void blocked_matmul(uint32_t m, uint32_t n, uint32_t k, const float* a, uint64_t lda, const float* b, uint64_t ldb,
                    float* c, uint64_t ldc, ThreadPool* pool) {
  ThreadPool inline_pool(1);
  ThreadPool& threads = pool != nullptr ? *pool : inline_pool;
  for (uint32_t i = 0; i < m; ++i) std::fill_n(c + uint64_t{i} * ldc, n, 0.0f);
  std::vector<float> bpack;
  std::vector<std::vector<float>> apack(threads.workers(), std::vector<float>(uint64_t{kMc} * kKc));
  const uint32_t blocks = (m + kMc - 1) / kMc;
  for (uint32_t jc = 0; jc < n; jc += kNc) {
    const uint32_t nc = std::min(kNc, n - jc);
    const uint32_t nc_pad = (nc + kNr - 1) / kNr * kNr;
    for (uint32_t pc = 0; pc < k; pc += kKc) {
      const uint32_t kc = std::min(kKc, k - pc);
      // B slab packed as 16-column strips: strip j/16 is [kc][16].
      bpack.assign(uint64_t{nc_pad} * kc, 0.0f);
      for (uint32_t j = 0; j < nc; ++j)
        for (uint32_t p = 0; p < kc; ++p)
          bpack[uint64_t{j / kNr} * kNr * kc + uint64_t{p} * kNr + j % kNr] = b[uint64_t{pc + p} * ldb + jc + j];
      threads.parallel_for(blocks, [&](std::size_t blk, unsigned w) {
        const uint32_t ic = static_cast<uint32_t>(blk) * kMc;
        block_product(std::min(kMc, m - ic), nc, kc, a + uint64_t{ic} * lda + pc, lda, bpack.data(),
                      c + uint64_t{ic} * ldc + jc, ldc, apack[w].data());
      });
    }
  }
}

}  // namespace kvrt::executor
