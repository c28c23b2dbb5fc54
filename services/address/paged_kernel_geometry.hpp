#pragma once
// How the kernel block size shapes a paged decode kernel (spec 0x0A, 0x0AA).
// At the pinned vLLM revision BLOCK_SIZE is a compile-time template parameter
// of the paged-attention kernel and participates in:
//
//   num_seq_blocks           = ceil(T / P)                 [kernel blocks]
//   num_partitions           = ceil(T / P_part)            [reduction partitions]
//   num_blocks_per_partition = P_part / P                  [kernel blocks], P | P_part
//   thread_group_size        = max(warp / P, 1)            [threads]
//   tokens_per_thread_group  = ceil(P / warp)              [tokens]
//   value vector width       = min(16 / sizeof(scalar), P) [scalars per 16-byte load]
//
// Allocator blocks, kernel blocks and reduction partitions are three levels.
#include <cstdint>

#include "services/common/result.hpp"

namespace kvrt {

struct PagedKernelShape {
  uint64_t context_length = 0;  // T [tokens]
  uint32_t partition_size = 0;  // P_part [tokens / partition]
  uint32_t block_size = 0;      // P = P_k [tokens / kernel block]
  uint32_t warp_size = 32;      // [threads / warp]
  uint32_t scalar_bytes = 2;    // [bytes / element]; fp16 by default
};

struct PagedKernelGeometry {
  PagedKernelShape shape;
  uint64_t num_seq_blocks = 0;
  uint64_t num_partitions = 0;
  uint32_t blocks_per_partition = 0;
  uint32_t thread_group_size = 0;
  uint32_t tokens_per_thread_group = 0;
  uint32_t value_vector_width = 0;
};

// Errors: invalid_argument (a zero size, or scalar_bytes not a divisor of the
// 16-byte load), kernel_block_not_divisor (P does not divide P_part).
Result<PagedKernelGeometry> paged_kernel_geometry(const PagedKernelShape& shape);

}  // namespace kvrt
