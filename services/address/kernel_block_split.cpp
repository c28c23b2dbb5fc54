#include "services/address/kernel_block_split.hpp"

#include <string>

namespace kvrt {

Result<KernelBlockSplit> split_allocator_blocks(std::span<const uint64_t> allocator_ids, uint32_t allocator_block_size,
                                                uint32_t kernel_block_size) {
  if (allocator_block_size == 0)
    return make_error(ErrorCode::invalid_argument, "allocator block size must be positive", "allocator_block_size");
  if (kernel_block_size == 0)
    return make_error(ErrorCode::invalid_argument, "kernel block size must be positive", "kernel_block_size");
  if (allocator_block_size % kernel_block_size != 0)
    return make_error(ErrorCode::kernel_block_not_divisor,
                      "kernel block size " + std::to_string(kernel_block_size) +
                          " does not divide allocator block size " + std::to_string(allocator_block_size),
                      "kernel_block_size");
  KernelBlockSplit out;
  out.allocator_block_size = allocator_block_size;
  out.kernel_block_size = kernel_block_size;
  out.split_factor = allocator_block_size / kernel_block_size;
  const uint64_t q = out.split_factor;
  out.kernel_ids.reserve(allocator_ids.size() * q);
  for (size_t i = 0; i < allocator_ids.size(); ++i) {
    const uint64_t a = allocator_ids[i];
    // The last kernel id a*q + q - 1 = (a+1)*q - 1 must be representable.
    if (a > (UINT64_MAX - (q - 1)) / q)
      return make_error(ErrorCode::invalid_argument,
                        "allocator id " + std::to_string(a) + " times " + std::to_string(q) + " overflows 64 bits",
                        "allocator_ids[" + std::to_string(i) + "]");
    for (uint64_t k = 0; k < q; ++k) out.kernel_ids.push_back(a * q + k);
  }
  return out;
}

}  // namespace kvrt
