#pragma once
// Allocator blocks split for a kernel (spec 0x0AC). vLLM's block table takes
// the allocator block size P_a and the kernel block size P_k separately and
// supports only P_a = q * P_k, q >= 1: allocator block a becomes the kernel
// blocks {a*q, a*q+1, ..., a*q+q-1}. The payload is not duplicated; only the
// kernel-visible table grows q-fold. The reverse (P_k > P_a, or P_k not
// dividing P_a) would need several separately allocated objects to form one
// contiguous kernel block, so it is rejected.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

struct KernelBlockSplit {
  uint32_t allocator_block_size = 0;  // P_a [tokens / allocator block]
  uint32_t kernel_block_size = 0;     // P_k [tokens / kernel block]
  uint32_t split_factor = 0;          // q = P_a / P_k [kernel blocks / allocator block]
  std::vector<uint64_t> kernel_ids;   // q entries per allocator id, in table order
};

// Errors: invalid_argument (a zero block size, or a kernel id past 2^64 - 1),
// kernel_block_not_divisor (P_a % P_k != 0).
Result<KernelBlockSplit> split_allocator_blocks(std::span<const uint64_t> allocator_ids, uint32_t allocator_block_size,
                                                uint32_t kernel_block_size);

}  // namespace kvrt
