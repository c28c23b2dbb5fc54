#pragma once
// ShmModelKvCache: the reference model's K/V in the node's shared-memory
// pools. A worker attaches every group's BlockPoolSegment, wraps
// them in a ShmPayloadStore, and hands the model this cache: the model
// writes its rows straight into the pools, and reads prefix rows other
// processes wrote there (reuse), through per-layer views built from each
// segment's own geometry (shm/pool_geometry.hpp, the 0x03E implementation).
// Canonical rows are read through ShmPayloadStore::read_rows, the order all
// payload stores share (services/allocator/payload_store.hpp).
//
// Lifetime: the cache borrows the store (and through it the mappings); the
// store must outlive it. The cache adds no locking: which process may write
// which rows is the allocator's business (a worker writes only blocks its
// receipts hand it).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/model_kv_cache.hpp"
#include "services/common/result.hpp"
#include "services/executor/kv_view.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt::shm {

class ShmModelKvCache final : public model::ModelKvCache {
 public:
  // store.segment(g) must hold the pool of layout.cache_groups[g]. Errors:
  // the layout's own validation errors; incompatible when the store has
  // another group count ("store.group_count"), a segment holds another cache
  // group ("segments[g].group") or was planned from another layout
  // ("segments[g].layout_digest"); those of executor::paged_kv_view.
  static Result<std::unique_ptr<ShmModelKvCache>> create(ShmPayloadStore& store, const CacheLayoutManifest& layout);

  const CacheLayoutManifest& layout() const override { return layout_; }
  uint32_t slot_count() const override;
  const executor::PagedKvView& layer_view(uint32_t model_layer) const override;
  std::byte* writable_k(uint32_t model_layer) override;
  std::byte* writable_v(uint32_t model_layer) override;
  // Errors: those of ShmPayloadStore::check_rows (unknown_group
  // "group_index", coordinate_out_of_range "slot" / "row_range"), and
  // invalid_argument ("out") when out is not B_row,g bytes.
  Status read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row, std::span<uint8_t> out) const override;

  ShmModelKvCache(const ShmModelKvCache&) = delete;
  ShmModelKvCache& operator=(const ShmModelKvCache&) = delete;

 private:
  ShmModelKvCache(ShmPayloadStore& store, CacheLayoutManifest layout) : store_(&store), layout_(std::move(layout)) {}

  ShmPayloadStore* store_;  // borrowed
  CacheLayoutManifest layout_;
  std::vector<executor::PagedKvView> views_;   // [model layer], into the store's mappings
  std::vector<std::byte*> k_bases_, v_bases_;  // [model layer] writable addresses of views_[l].k/v.base
};

}  // namespace kvrt::shm
