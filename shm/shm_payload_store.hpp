#pragma once
// ShmPayloadStore: the allocator's BlockPayloadStore over POSIX shared-memory
// block pools, one BlockPoolSegment per cache group (issue 3: blocks are "real
// bytes in POSIX shared memory that another process can read and write", and
// the copy-on-write copy of 0x05C steps 5-6 is "done on the real bytes").
//
// Ownership (STYLE.md habit 5): the store owns its segments; they are moved in.
// What destruction does follows from how each segment was obtained: a created
// (owning) segment removes its name when the store goes, an attached one only
// unmaps. So one class serves both sides of a pool: the owner process hands
// the store to its BlockAllocator (which borrows it by pointer and must not
// outlive it, see shared_block_pools.hpp), and a peer process builds one over
// attached segments to read or write rows at the positions receipts name.
//
// Row translation. Rows cross the BlockPayloadStore interface in the canonical
// order of services/allocator/payload_store.hpp: per token, K then V, each
// layer_local-major, then kv_head, then head_dim lane. A pool lays its K and V
// tensors out in the group's declared axis order (0x03E), where one token's
// row is generally not contiguous (layer-major g1 of two-group-tp2 puts each
// layer of a token in another slot-sized slab; slot-major g0 still interleaves
// the block's other tokens between layers). At construction the store derives,
// per group and tensor, a row plan: the byte runs of one token row, in
// canonical order, relative to the row's first element (l = h = x = 0).
//   - When the declared order keeps layer_local before kv_head before head_dim
//     (every shipped layout), walking the declared order over one token visits
//     the scalars in canonical order, so the plan is exactly the pool's own
//     row_runs() of one token, fused as the pool fuses them.
//   - Any other order is gathered per canonical (layer, head, lane) from
//     byte_offset(), fusing neighbours that happen to be adjacent.
// Element offsets are linear in the coordinates (0x03E), so the plan applies
// to every (slot, token) after adding that row's origin, which comes from the
// pool's byte_offset(). Block copies and zeroing need no canonical order and
// walk the pool's row_runs() of the whole row range directly.
#include <cstdint>
#include <span>
#include <vector>

#include "services/allocator/allocator_config.hpp"
#include "services/allocator/payload_store.hpp"
#include "services/common/result.hpp"
#include "shm/block_pool_segment.hpp"

namespace kvrt::shm {

class ShmPayloadStore final : public BlockPayloadStore {
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

  // Whether rows [first_row, first_row + rows) of a block exist in a group.
  // The BlockPayloadStore operations assert this (their caller is the
  // allocator); a process that takes positions from outside (a peer reading a
  // receipt off its command line) checks first. Errors: unknown_group
  // ("group_index"), coordinate_out_of_range ("slot", "row_range").
  Status check_rows(uint32_t group_index, uint32_t slot, uint32_t first_row, uint32_t rows) const;

  uint32_t group_count() const { return static_cast<uint32_t>(groups_.size()); }
  uint32_t block_tokens() const;     // P_a [tokens / block]
  uint32_t capacity_blocks() const;  // per group pool [blocks]
  uint64_t row_bytes(uint32_t group_index) const;    // B_row,g [bytes / token], K plus V
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
  // One contiguous piece of a canonical token row inside a tensor.
  struct PlanRun {
    uint64_t offset = 0;  // [bytes] from the row's first element (l = h = x = 0)
    uint64_t bytes = 0;
  };
  struct TensorRows {
    std::vector<PlanRun> plan;  // canonical order; bytes sum to the tensor's row part
    uint64_t row_bytes = 0;     // L_g * H_kv,g * d_h * b [bytes]
  };
  struct GroupPool {
    BlockPoolSegment segment;
    TensorRows k, v;
  };

  explicit ShmPayloadStore(std::vector<GroupPool> groups) : groups_(std::move(groups)) {}
  static Result<TensorRows> plan_rows(const BlockPoolSegment& segment, TensorKind kind);
  // Segment byte offset of element (l = 0, token `row`, h = 0, x = 0) of a block.
  uint64_t row_origin(uint32_t g, uint32_t slot, uint32_t row, TensorKind kind) const;
  // The whole K or V tensor of group g as bytes of this process's mapping,
  // indexed by segment offset minus the tensor's base offset.
  std::span<const uint8_t> tensor_view(uint32_t g, TensorKind kind) const;
  std::span<uint8_t> tensor_span(uint32_t g, TensorKind kind);
  void assert_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows, const char* what) const;

  std::vector<GroupPool> groups_;
  std::vector<ByteRun> scratch_runs_;  // copy_rows: the destination's runs, reused
};

}  // namespace kvrt::shm
