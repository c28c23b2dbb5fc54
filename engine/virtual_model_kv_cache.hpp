#pragma once
// The reference model's cache over a worker's view of the node's mapper
// pool (vAttention, spec 0x06): every request slot is one contiguous virtual
// K/V range of T_max rows per tensor, backed only where the mapper owner
// mapped pages (0x06A), and the same bytes the node and every other worker
// see through their own views (0x06B).
//
// The model reads and writes through the executor's paged kernels, so the
// cache presents each slot's range as T_max / P_a consecutive "blocks" of
// P_a rows: request slot s holds blocks [s n, (s + 1) n), n = T_max / P_a,
// and its table is that run (blocks_of). That is exact only when the slot's
// range has no padding (R = T_max B_row, 0x06A) and P_a divides T_max;
// create() refuses anything else. Element (slot s, row t, head h, lane x) of
// layer l lives at 0x06C's address base(X, l) + s R + (t H d + h d + x) b,
// which is this view's (block s n + t / P_a, row t mod P_a) — no block table
// chooses where a row lives, only the page table does.
#include <memory>

#include "engine/model/model_kv_cache.hpp"
#include "services/mapper/mapper_view.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt {

class VirtualModelKvCache final : public model::ModelKvCache {
 public:
  // Errors: incompatible ("layout") when the layout has more than one cache
  // group (the mapper's tensors are group 0's) or its K and V dtypes differ
  // in width from the mapper's element; incompatible ("mapper") when the
  // mapper's layers, heads or head width differ from the group's, P_a does
  // not divide T_max, or a slot's range is padded (R != T_max B_row).
  // `view` must outlive the cache.
  static Result<std::unique_ptr<VirtualModelKvCache>> create(const CacheLayoutManifest& layout, MapperPoolView& view);
  // This process's view of the page pool of `node`'s mapper owner, for a
  // layout of virtual pages. Errors: config_field ("mapper") when the node
  // serves no [mapper]; MapperPoolView::attach's.
  static Result<MapperPoolView> attach_view(const NodeDescriptor& node, const CacheLayoutManifest& layout);

  uint32_t blocks_per_slot() const { return blocks_per_slot_; }  // T_max / P_a
  // The table of request slot s: blocks [s n, (s + 1) n) in group 0.
  model::SequenceBlocks blocks_of(uint32_t request_slot) const;

  const CacheLayoutManifest& layout() const override { return layout_; }
  uint32_t slot_count() const override { return slot_count_; }
  const executor::PagedKvView& layer_view(uint32_t model_layer) const override;
  std::byte* writable_k(uint32_t model_layer) override;
  std::byte* writable_v(uint32_t model_layer) override;
  Status read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row, std::span<uint8_t> out) const override;

  VirtualModelKvCache(const VirtualModelKvCache&) = delete;
  VirtualModelKvCache& operator=(const VirtualModelKvCache&) = delete;

 private:
  VirtualModelKvCache(CacheLayoutManifest layout, uint32_t blocks_per_slot, uint32_t slot_count)
      : layout_(std::move(layout)), blocks_per_slot_(blocks_per_slot), slot_count_(slot_count) {}
  CacheLayoutManifest layout_;
  uint32_t blocks_per_slot_ = 0;
  uint32_t slot_count_ = 0;                   // B n [blocks]
  std::vector<executor::PagedKvView> views_;  // [model layer]
};

}  // namespace kvrt
