#pragma once
// ShmPayloadStore: the allocator's BlockPayloadStore over POSIX shared-memory
// block pools, one BlockPoolSegment per cache group: blocks are real bytes in
// POSIX shared memory that another process reads and writes, and the
// copy-on-write copy of 0x05C steps 5-6 moves those bytes.
//
// Ownership (docs/conventions.md habit 5): the store owns its segments; they are moved in.
// What destruction does follows from how each segment was obtained: a created
// (owning) segment removes its name when the store goes, an attached one only
// unmaps. So one class serves both sides of a pool: the owner process hands
// the store to its BlockAllocator (which borrows it by pointer and must not
// outlive it, see shared_block_pools.hpp), and a peer process builds one over
// attached segments to read or write rows at the positions receipts name.
//
// Row translation: shm/pool_row_plan.hpp (the same plan a GPU pool uses).
#include <cstdint>
#include <span>
#include <vector>

#include "services/allocator/allocator_config.hpp"
#include "services/common/result.hpp"
#include "shm/block_pool_segment.hpp"
#include "shm/pool_row_plan.hpp"
#include "shm/shared_pool_store.hpp"

namespace kvrt::shm {

class ShmPayloadStore final : public SharedPoolStore {
 public:
  // segments[g] holds the pool of group index g (the order of the allocator
  // config's groups and of the manifest's cache_groups). Errors:
  // invalid_argument ("segments") for none;
  // incompatible ("segments[g].block_tokens" / ".capacity_blocks") when the
  // pools disagree on P_a or capacity, since a bundle takes one block of every
  // group (0x04E); invalid_argument ("segments[g].group") for a cache group
  // that appears twice.
  static Result<ShmPayloadStore> create(std::vector<BlockPoolSegment> segments);

  ShmPayloadStore(ShmPayloadStore&&) noexcept = default;
  ShmPayloadStore& operator=(ShmPayloadStore&&) noexcept = default;

  // Whether an allocator config names exactly these pools: group count and,
  // per group, cache group, pool id, pool generation, capacity [blocks] and
  // B_row [bytes / token], and block_size == P_a. Errors: config_field naming
  // the first field that differs (e.g. "groups[1].pool_generation").
  Status check_config(const BlockAllocatorConfig& config) const;

  // SharedPoolStore (check_rows comes with it).
  uint32_t group_count() const override { return static_cast<uint32_t>(groups_.size()); }
  uint32_t block_tokens() const override;
  uint32_t capacity_blocks() const override;
  uint64_t row_bytes(uint32_t group_index) const override;
  CacheGroupId group(uint32_t group_index) const override { return segment(group_index).group(); }
  PoolMemory memory(uint32_t group_index) const override;
  uint64_t k_row_bytes(uint32_t group_index) const;  // K part of a canonical row [bytes]
  const BlockPoolSegment& segment(uint32_t group_index) const { return groups_.at(group_index).segment; }
  BlockPoolSegment& segment(uint32_t group_index) { return groups_.at(group_index).segment; }
  // How another process names block `slot` of a group's pool.
  PoolBlockRef block_ref(uint32_t group_index, uint32_t slot) const;

  // BlockPayloadStore (argument errors are kvrt bugs: KVRT_ASSERT).
  void copy_rows(uint32_t group_index, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) override;
  void write_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                  std::span<const uint8_t> bytes) override;
  void read_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows,
                 std::span<uint8_t> out) const override;
  void zero_block(uint32_t group_index, uint32_t slot) override;

 private:
  struct GroupPool {
    BlockPoolSegment segment;
    PoolRowPlan rows;
  };

  explicit ShmPayloadStore(std::vector<GroupPool> groups) : groups_(std::move(groups)) {}
  // This process's mapping of group g's segment, from byte 0.
  const uint8_t* segment_view(uint32_t g) const;
  uint8_t* segment_base(uint32_t g);

  std::vector<GroupPool> groups_;
};

}  // namespace kvrt::shm
