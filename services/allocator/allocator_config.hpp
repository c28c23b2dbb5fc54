#pragma once
// Configuration of the allocator owner. One pool per cache group;
// every pool has the same block count because a bundle takes one block from
// each group (0x04E), and groups are addressed by their index in the layout.
#include <cstdint>
#include <optional>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct GroupPoolConfig {
  CacheGroupId group;
  PoolId pool;
  PoolGeneration pool_generation;
  uint32_t capacity_blocks = 0;  // [blocks]
  uint32_t block_id_base = 0;    // block id of slot s is block_id_base + s (1000, 2000 in 0x05B)
  uint64_t row_bytes = 0;        // B_row,g [bytes / token] (0x02A), for copy_payload_bytes
  // Starting generation of each block, e.g. restored from a checkpoint so that
  // generations never go backwards across a restart (0x05F). Empty = all 1.
  std::vector<uint32_t> initial_generations;
};

// Which unreferenced block an allocation takes (`kvrt replay` runs the vLLM
// queue beside kvrt's to compare hit rates on one trace).
enum class FreeQueuePolicy : uint8_t {
  // kvrt default: truly free blocks first, then the oldest evictable cached
  // block, so cached prefixes survive as long as uncached capacity remains.
  free_first_then_oldest_evictable = 0,
  // vLLM v1: one queue holds free and zero-ref cached blocks in release
  // order; allocation takes the front and drops its hash if it has one.
  single_lru_queue = 1,
};

struct BlockAllocatorConfig {
  std::vector<GroupPoolConfig> groups;
  uint32_t block_size = 16;  // P_a [tokens / block], the same for every group here
  uint64_t initial_epoch = 1;
  uint32_t max_requests = 1 << 16;  // request slots [requests]
  // Zero a block's bytes when it is recycled to a new owner, in addition to the
  // valid-row frontier that already hides old rows.
  bool zero_on_recycle = false;
  FreeQueuePolicy queue_policy = FreeQueuePolicy::free_first_then_oldest_evictable;

  Status validate() const;
};

}  // namespace kvrt
