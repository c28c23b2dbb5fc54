#include "shm/shm_model_kv_cache.hpp"

#include <string>
#include <utility>

#include "services/common/assert.hpp"

namespace kvrt::shm {

Result<std::unique_ptr<ShmModelKvCache>> ShmModelKvCache::create(ShmPayloadStore& store,
                                                                 const CacheLayoutManifest& layout) {
  KVRT_TRY(layout.validate());
  if (store.group_count() != layout.cache_groups.size())
    return make_error(ErrorCode::incompatible,
                      "the store holds " + std::to_string(store.group_count()) + " pools for " +
                          std::to_string(layout.cache_groups.size()) + " cache groups",
                      "store.group_count");
  const Sha256Digest digest = layout.digest();
  std::unique_ptr<ShmModelKvCache> cache(new ShmModelKvCache(store, layout));
  const uint32_t layers = layout.layer_count();
  cache->views_.resize(layers);
  cache->k_bases_.resize(layers);
  cache->v_bases_.resize(layers);
  for (uint32_t g = 0; g < store.group_count(); ++g) {
    const CacheGroupLayout& group = layout.cache_groups[g];
    BlockPoolSegment& segment = store.segment(g);
    const std::string field = "segments[" + std::to_string(g) + "]";
    if (segment.group() != group.group_id)
      return make_error(ErrorCode::incompatible,
                        "the pool holds cache group " + std::to_string(segment.group().value) +
                            ", the layout's group " + std::to_string(g) + " is " + std::to_string(group.group_id.value),
                        field + ".group");
    // The digest pins dtypes, axis order and P_a, i.e. everything the views
    // below take from the segment's geometry.
    if (!(segment.layout_digest() == digest))
      return make_error(ErrorCode::incompatible, "the pool was planned from another layout manifest",
                        field + ".layout_digest");
    const PoolGeometry& geometry = segment.geometry();
    const auto tensor = [&](TensorKind kind) -> Result<std::span<uint8_t>> {
      return segment.bytes(ByteRun{geometry.tensor_offset(kind), geometry.tensor_bytes(kind)});
    };
    std::span<uint8_t> k, v;
    KVRT_TRY_ASSIGN(k, tensor(TensorKind::K));
    KVRT_TRY_ASSIGN(v, tensor(TensorKind::V));
    auto* k_bytes = reinterpret_cast<std::byte*>(k.data());
    auto* v_bytes = reinterpret_cast<std::byte*>(v.data());
    for (uint32_t l = 0; l < group.layers(); ++l) {
      auto view =
          executor::paged_kv_view(geometry.tensor(), l, executor::KvTensorBytes{k_bytes, k.size(), group.k_dtype},
                                  executor::KvTensorBytes{v_bytes, v.size(), group.v_dtype});
      if (!view.ok()) {
        Error e = view.error();
        e.field = field + "." + e.field;
        return e;
      }
      const uint32_t layer = group.layer_start + l;
      cache->views_[layer] = *view;
      // The view's bases are k_bytes/v_bytes plus the layer's offset; keep
      // the same addresses through the writable mapping.
      cache->k_bases_[layer] = k_bytes + (view->k.base - k_bytes);
      cache->v_bases_[layer] = v_bytes + (view->v.base - v_bytes);
    }
  }
  return cache;
}

uint32_t ShmModelKvCache::slot_count() const { return store_->capacity_blocks(); }

const executor::PagedKvView& ShmModelKvCache::layer_view(uint32_t model_layer) const {
  KVRT_ASSERT(model_layer < views_.size(),
              "layer " + std::to_string(model_layer) + " of a " + std::to_string(views_.size()) + "-layer cache");
  return views_[model_layer];
}

std::byte* ShmModelKvCache::writable_k(uint32_t model_layer) {
  layer_view(model_layer);  // asserts the layer
  return k_bases_[model_layer];
}
std::byte* ShmModelKvCache::writable_v(uint32_t model_layer) {
  layer_view(model_layer);
  return v_bases_[model_layer];
}

Status ShmModelKvCache::read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row,
                                           std::span<uint8_t> out) const {
  // Checked in the interface's order and names (model_kv_cache.hpp) before
  // the store's own check, which names the row "row_range".
  if (group_index >= store_->group_count())
    return make_error(
        ErrorCode::unknown_group,
        "group index " + std::to_string(group_index) + " of " + std::to_string(store_->group_count()) + " groups",
        "group_index");
  if (slot >= store_->capacity_blocks())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "slot " + std::to_string(slot) + " >= " + std::to_string(store_->capacity_blocks()) + " slots",
                      "slot");
  if (row >= store_->block_tokens())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "row " + std::to_string(row) + " >= P_a " + std::to_string(store_->block_tokens()), "row");
  if (out.size() != store_->row_bytes(group_index))
    return make_error(ErrorCode::invalid_argument,
                      "a canonical row of group index " + std::to_string(group_index) + " is " +
                          std::to_string(store_->row_bytes(group_index)) + " bytes, not " + std::to_string(out.size()),
                      "out");
  KVRT_TRY(store_->check_rows(group_index, slot, row, 1));
  store_->read_rows(group_index, slot, row, 1, out);
  return Status::success();
}

}  // namespace kvrt::shm
