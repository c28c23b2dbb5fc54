#include "engine/virtual_model_kv_cache.hpp"

#include <string>

#include "services/common/assert.hpp"

namespace kvrt {

Result<std::unique_ptr<VirtualModelKvCache>> VirtualModelKvCache::create(const CacheLayoutManifest& layout,
                                                                         MapperPoolView& view) {
  KVRT_TRY(layout.validate());
  if (layout.cache_groups.size() != 1)
    return make_error(ErrorCode::incompatible,
                      "layout '" + layout.manifest_id + "' has " + std::to_string(layout.cache_groups.size()) +
                          " cache groups; the mapper's tensors are one group's (use a single-group layout)",
                      "layout");
  const CacheGroupLayout& group = layout.cache_groups[0];
  const MapperGeometry& geo = view.geometry();
  const MapperConfig& c = geo.config();
  if (scalar_bytes(group.k_dtype) != c.element_bytes || scalar_bytes(group.v_dtype) != c.element_bytes)
    return make_error(ErrorCode::incompatible,
                      "the mapper's elements are " + std::to_string(c.element_bytes) + " bytes; the layout's K/V are " +
                          std::to_string(scalar_bytes(group.k_dtype)) + " and " +
                          std::to_string(scalar_bytes(group.v_dtype)),
                      "layout");
  const uint32_t p_a = layout.allocator_block_size;
  if (c.local_layers != group.layers() || c.kv_heads != group.kv_heads_local || c.head_dim != group.head_dim ||
      c.max_tokens % p_a != 0 || geo.slot_range_bytes() != uint64_t{c.max_tokens} * geo.row_bytes())
    return make_error(ErrorCode::incompatible,
                      "the mapper's geometry (" + std::to_string(c.local_layers) + " layers, " +
                          std::to_string(c.kv_heads) + " heads of " + std::to_string(c.head_dim) + ", T_max " +
                          std::to_string(c.max_tokens) + ", R " + std::to_string(geo.slot_range_bytes()) +
                          " B) does not tile into P_a = " + std::to_string(p_a) + " row blocks of layout '" +
                          layout.manifest_id + "'",
                      "mapper");
  const uint32_t per_slot = c.max_tokens / p_a;
  std::unique_ptr<VirtualModelKvCache> cache(new VirtualModelKvCache(layout, per_slot, per_slot * c.request_slots));
  const uint64_t row_elements = uint64_t{c.kv_heads} * c.head_dim;
  for (uint32_t l = 0; l < c.local_layers; ++l) {
    executor::PagedKvView v;
    for (const KvTensorKind kind : {KvTensorKind::key, KvTensorKind::value}) {
      executor::KvTensorView& t = kind == KvTensorKind::key ? v.k : v.v;
      t.base = view.base() + geo.page_offset(geo.tensor_index(l, kind), 0, 0);
      t.dtype = kind == KvTensorKind::key ? group.k_dtype : group.v_dtype;
      t.head_dim = c.head_dim;
      t.slot_stride = uint64_t{p_a} * row_elements;
      t.token_stride = row_elements;
      t.head_stride = c.head_dim;
      t.lane_stride = 1;
    }
    v.block_tokens = p_a;
    v.slot_count = cache->slot_count_;
    v.kv_heads = c.kv_heads;
    cache->views_.push_back(v);
  }
  return cache;
}

model::SequenceBlocks VirtualModelKvCache::blocks_of(uint32_t request_slot) const {
  model::SequenceBlocks b;
  b.slots.resize(1);
  for (uint32_t j = 0; j < blocks_per_slot_; ++j) b.slots[0].push_back(request_slot * blocks_per_slot_ + j);
  return b;
}

const executor::PagedKvView& VirtualModelKvCache::layer_view(uint32_t model_layer) const {
  KVRT_ASSERT(model_layer < views_.size(),
              "layer " + std::to_string(model_layer) + " of a " + std::to_string(views_.size()) + "-layer cache");
  return views_[model_layer];
}

// The view's bytes are this process's shared, writable mapping of the pool;
// the executor views hold them as const because kernels only read.
std::byte* VirtualModelKvCache::writable_k(uint32_t model_layer) {
  return const_cast<std::byte*>(layer_view(model_layer).k.base);
}
std::byte* VirtualModelKvCache::writable_v(uint32_t model_layer) {
  return const_cast<std::byte*>(layer_view(model_layer).v.base);
}

Status VirtualModelKvCache::read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row,
                                               std::span<uint8_t> out) const {
  if (group_index != 0)
    return make_error(ErrorCode::unknown_group, "group index " + std::to_string(group_index) + " of 1 group",
                      "group_index");
  if (slot >= slot_count_ || row >= layout_.allocator_block_size)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "block " + std::to_string(slot) + " row " + std::to_string(row) + " is outside " +
                          std::to_string(slot_count_) + " blocks of " + std::to_string(layout_.allocator_block_size),
                      slot >= slot_count_ ? "slot" : "row");
  const CacheGroupLayout& group = layout_.cache_groups[0];
  if (out.size() != group.row_bytes())
    return make_error(
        ErrorCode::invalid_argument,
        "a canonical row is " + std::to_string(group.row_bytes()) + " bytes, not " + std::to_string(out.size()), "out");
  model::gather_canonical_row(group, views_, slot, row, out);
  return Status::success();
}

Result<MapperPoolView> VirtualModelKvCache::attach_view(const NodeDescriptor& node, const CacheLayoutManifest& layout) {
  if (!node.mapper)
    return make_error(ErrorCode::config_field,
                      "layout '" + layout.manifest_id +
                          "' declares physical_mode = \"virtual_pages\" but the node serves no [mapper]",
                      "mapper");
  return MapperPoolView::attach(*node.mapper);
}

}  // namespace kvrt
