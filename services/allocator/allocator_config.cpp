#include "services/allocator/allocator_config.hpp"

#include <string>

namespace kvrt {

Status BlockAllocatorConfig::validate() const {
  if (groups.empty()) return make_error(ErrorCode::config_field, "at least one cache group pool is required", "groups");
  if (block_size == 0 || block_size > UINT16_MAX)
    return make_error(ErrorCode::config_field, "block_size must be in [1, 65535] tokens", "block_size");
  if (max_requests == 0) return make_error(ErrorCode::config_field, "max_requests must be positive", "max_requests");
  const uint32_t capacity = groups[0].capacity_blocks;
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    const std::string where = "groups[" + std::to_string(i) + "]";
    // A bundle takes one block of every group (0x04E): equal pool sizes.
    if (g.capacity_blocks == 0 || g.capacity_blocks != capacity)
      return make_error(ErrorCode::config_field,
                        "every cache group pool needs the same positive block count (got " +
                            std::to_string(g.capacity_blocks) + ", first group " + std::to_string(capacity) + ")",
                        where + ".capacity_blocks");
    if (uint64_t{g.block_id_base} + g.capacity_blocks > UINT32_MAX)
      return make_error(ErrorCode::config_field, "block ids overflow 32 bits", where + ".block_id_base");
    if (!g.initial_generations.empty() && g.initial_generations.size() != g.capacity_blocks)
      return make_error(ErrorCode::config_field, "initial_generations must list one generation per block",
                        where + ".initial_generations");
    for (size_t j = 0; j < i; ++j)
      if (groups[j].group == g.group || groups[j].pool == g.pool)
        return make_error(ErrorCode::config_field, "duplicate cache group or pool id", where);
  }
  return Status::success();
}

}  // namespace kvrt
