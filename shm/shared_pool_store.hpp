#pragma once
// SharedPoolStore: a BlockPayloadStore over real block pools that several
// processes share, one pool per cache group, each laid out as
// pool_geometry.hpp describes. Two realisations: POSIX shared memory
// (shm_payload_store.hpp) and GPU memory shared through CUDA IPC
// (gpu/cuda_pool_store.hpp). A worker writes and reads K/V rows at the
// positions its receipts name through this interface, whichever the node's
// pools are: shared memory on the CPU, CUDA IPC handles on the GPU.
#include <cstdint>
#include <string>

#include "services/allocator/payload_store.hpp"
#include "services/common/assert.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt::shm {

class PoolGeometry;
class PoolRowPlan;

// Where one group's pool lives in this process, for zero-copy access:
// `base` is byte 0 of the pool's layout (its header; offsets are
// PoolGeometry's), `device` whether those bytes are GPU memory (CUDA device
// 0) rather than host memory.
struct PoolMemory {
  uint8_t* base = nullptr;
  const PoolRowPlan* rows = nullptr;  // the pool's geometry and its canonical row plan
  bool device = false;
};

class SharedPoolStore : public BlockPayloadStore {
 public:
  virtual uint32_t group_count() const = 0;
  virtual uint32_t block_tokens() const = 0;                   // P_a [tokens / block]
  virtual uint32_t capacity_blocks() const = 0;                // per group pool [blocks]
  virtual uint64_t row_bytes(uint32_t group_index) const = 0;  // B_row,g [bytes / token], K plus V
  virtual CacheGroupId group(uint32_t group_index) const = 0;  // the manifest's cache group of a pool
  // The pool's bytes in this process (writable by the caller at the blocks
  // its receipts name). Asserts a group index inside group_count().
  virtual PoolMemory memory(uint32_t group_index) const = 0;

  // Whether rows [first_row, first_row + rows) of a block exist in a group.
  // The BlockPayloadStore operations assert this (their caller is the
  // allocator); a process that takes positions from outside (a worker
  // reading a receipt) checks first. Errors: unknown_group ("group_index"),
  // coordinate_out_of_range ("slot", "row_range").
  Status check_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows) const {
    if (group_index >= group_count())
      return make_error(ErrorCode::unknown_group,
                        "group index " + std::to_string(group_index) + " is outside the store's " +
                            std::to_string(group_count()) + " pools",
                        "group_index");
    if (slot >= capacity_blocks())
      return make_error(ErrorCode::coordinate_out_of_range,
                        "slot " + std::to_string(slot) + " is outside [0, " + std::to_string(capacity_blocks()) + ")",
                        "slot");
    if (uint64_t{first_row} + rows > block_tokens())
      return make_error(ErrorCode::coordinate_out_of_range,
                        "rows [" + std::to_string(first_row) + ", " + std::to_string(uint64_t{first_row} + rows) +
                            ") are not inside a block of " + std::to_string(block_tokens()) + " rows",
                        "row_range");
    return Status::success();
  }

 protected:
  // The BlockPayloadStore operations' argument check: their caller is the
  // allocator (or a worker that ran check_rows), so a failure is a kvrt bug.
  void assert_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows, const char* what) const {
    const Status status = check_rows(group_index, slot, first_row, rows);
    KVRT_ASSERT(status.ok(), std::string(what) + ": " + status.error().describe());
  }
};

}  // namespace kvrt::shm
