#include "services/address/paged_kernel_geometry.hpp"

#include <algorithm>
#include <string>

namespace kvrt {
namespace {
// 16 bytes is the width of one vectorised load in the pinned kernel (uint4).
constexpr uint32_t kVectorLoadBytes = 16;

uint64_t ceil_div_exact(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }
}  // namespace

Result<PagedKernelGeometry> paged_kernel_geometry(const PagedKernelShape& s) {
  if (s.block_size == 0) return make_error(ErrorCode::invalid_argument, "block size must be positive", "block_size");
  if (s.partition_size == 0)
    return make_error(ErrorCode::invalid_argument, "partition size must be positive", "partition_size");
  if (s.warp_size == 0) return make_error(ErrorCode::invalid_argument, "warp size must be positive", "warp_size");
  if (s.scalar_bytes == 0 || kVectorLoadBytes % s.scalar_bytes != 0)
    return make_error(ErrorCode::invalid_argument,
                      "scalar width " + std::to_string(s.scalar_bytes) + " bytes does not divide a 16-byte load",
                      "scalar_bytes");
  // 0x0A: a partition must consist of whole kernel blocks.
  if (s.partition_size % s.block_size != 0)
    return make_error(ErrorCode::kernel_block_not_divisor,
                      "block size " + std::to_string(s.block_size) + " does not divide partition size " +
                          std::to_string(s.partition_size),
                      "block_size");
  PagedKernelGeometry g;
  g.shape = s;
  g.num_seq_blocks = ceil_div_exact(s.context_length, s.block_size);
  g.num_partitions = ceil_div_exact(s.context_length, s.partition_size);
  g.blocks_per_partition = s.partition_size / s.block_size;
  g.thread_group_size = std::max<uint32_t>(s.warp_size / s.block_size, 1);
  g.tokens_per_thread_group = static_cast<uint32_t>(ceil_div_exact(s.block_size, s.warp_size));
  g.value_vector_width = std::min(kVectorLoadBytes / s.scalar_bytes, s.block_size);
  return g;
}

}  // namespace kvrt
