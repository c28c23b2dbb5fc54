#pragma once
// A cache-blocked FP32 matrix multiply, C = A B (row-major). It exists to
// measure the machine's matrix-multiply rate in `kvrt bench attention` (the
// compute roof of the shared-prefix roofline) with the same register
// tile and the same compiler vectorisation as the executor's tile kernel, so
// the roof is what this code base can reach on this machine, not a vendor
// BLAS figure.
//
// Blocking (BLIS order): N in panels of kNc columns, K in slabs of kKc, B
// packed per (slab, panel) into 16-column strips; M in blocks of kMc rows
// (the parallel loop), A packed into 6-row strips; a 6 x 16 micro-kernel
// (12 vector accumulators under AVX2) accumulates into C. Edges are zero
// padded in the packed copies and masked on the way back to C.
#include <cstdint>

#include "services/executor/thread_pool.hpp"

namespace kvrt::executor {

// C[M][N] = A[M][K] * B[K][N]; lda, ldb, ldc in elements. C is overwritten.
void blocked_matmul(uint32_t m, uint32_t n, uint32_t k, const float* a, uint64_t lda, const float* b, uint64_t ldb,
                    float* c, uint64_t ldc, ThreadPool* pool = nullptr);

}  // namespace kvrt::executor
