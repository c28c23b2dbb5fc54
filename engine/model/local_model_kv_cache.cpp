// LocalModelKvCache: process-private pools for the reference run.
//
// Each group's K and V tensors are laid out by tensor_geometry(group, P_a,
// slots), the 0x03E implementation that shm/pool_geometry.cpp also plans a
// shared pool with; the per-layer views come from executor::paged_kv_view()
// over that geometry, exactly as ShmModelKvCache builds them over a segment.
// Only the tensors' base addresses differ, so the model writes the same
// element offsets into both and their canonical rows compare bitwise.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "engine/model/model_kv_cache.hpp"
#include "services/address/tensor_geometry.hpp"
#include "services/common/assert.hpp"

namespace kvrt::model {
namespace {

// Bytes of one tensor, or nullopt when they do not fit 64 bits.
std::optional<uint64_t> tensor_bytes(const TensorGeometry& geometry, ScalarType dtype) {
  const unsigned __int128 bytes = static_cast<unsigned __int128>(geometry.elements) * scalar_bytes(dtype);
  if (bytes > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace

void gather_canonical_row(const CacheGroupLayout& group, std::span<const executor::PagedKvView> views, uint32_t slot,
                          uint32_t row, std::span<uint8_t> out) {
  // Canonical order (services/allocator/payload_store.hpp): all of K, then
  // all of V, each layer_local-major, then kv_head, then lane.
  const auto copy_lanes = [](const executor::KvTensorView& t, uint32_t s, uint32_t r, uint32_t head, uint8_t* dst) {
    const std::byte* src = t.row(s, r, head);
    const uint32_t b = t.scalar_bytes();
    if (t.lane_stride == 1) {
      std::memcpy(dst, src, uint64_t{t.head_dim} * b);
      return dst + uint64_t{t.head_dim} * b;
    }
    for (uint32_t x = 0; x < t.head_dim; ++x, dst += b) std::memcpy(dst, src + uint64_t{x} * t.lane_stride * b, b);
    return dst;
  };
  uint8_t* dst = out.data();
  for (int kind = 0; kind < 2; ++kind)
    for (uint32_t layer = group.layer_start; layer < group.layer_end; ++layer) {
      const executor::PagedKvView& view = views[layer];
      for (uint32_t h = 0; h < group.kv_heads_local; ++h)
        dst = copy_lanes(kind == 0 ? view.k : view.v, slot, row, h, dst);
    }
  KVRT_ASSERT(dst == out.data() + out.size(), "canonical row gather wrote a wrong byte count");
}

Result<std::unique_ptr<LocalModelKvCache>> LocalModelKvCache::create(const CacheLayoutManifest& layout,
                                                                     uint32_t slots) {
  if (slots == 0) return make_error(ErrorCode::invalid_argument, "a cache needs at least one slot", "slots");
  KVRT_TRY(layout.validate());
  std::unique_ptr<LocalModelKvCache> cache(new LocalModelKvCache(layout, slots));
  cache->views_.resize(layout.layer_count());
  for (size_t g = 0; g < layout.cache_groups.size(); ++g) {
    const CacheGroupLayout& group = layout.cache_groups[g];
    const std::string field = "cache_groups[" + std::to_string(g) + "]";
    const std::optional<TensorGeometry> geometry = tensor_geometry(group, layout.allocator_block_size, slots);
    const std::optional<uint64_t> k_bytes = geometry ? tensor_bytes(*geometry, group.k_dtype) : std::nullopt;
    const std::optional<uint64_t> v_bytes = geometry ? tensor_bytes(*geometry, group.v_dtype) : std::nullopt;
    if (!k_bytes || !v_bytes)
      return make_error(ErrorCode::invalid_argument,
                        "the pool of " + std::to_string(slots) + " slots overflows 64-bit byte arithmetic", "slots");
    GroupPool& pool = cache->pools_.emplace_back();
    pool.k.reset(static_cast<std::byte*>(std::calloc(std::max<uint64_t>(*k_bytes, 1), 1)));
    pool.v.reset(static_cast<std::byte*>(std::calloc(std::max<uint64_t>(*v_bytes, 1), 1)));
    if (pool.k == nullptr || pool.v == nullptr)
      return make_error(ErrorCode::storage_exhausted,
                        "no memory for a cache of " + std::to_string(slots) + " slots (" +
                            std::to_string(*k_bytes + *v_bytes) + " bytes of " + field + ")",
                        "slots");
    for (uint32_t l = 0; l < group.layers(); ++l) {
      auto view = executor::paged_kv_view(*geometry, l, executor::KvTensorBytes{pool.k.get(), *k_bytes, group.k_dtype},
                                          executor::KvTensorBytes{pool.v.get(), *v_bytes, group.v_dtype});
      if (!view.ok()) {
        Error e = view.error();
        e.field = field + "." + e.field;
        return e;
      }
      cache->views_[group.layer_start + l] = *view;
    }
  }
  return cache;
}

const executor::PagedKvView& LocalModelKvCache::layer_view(uint32_t model_layer) const {
  KVRT_ASSERT(model_layer < views_.size(),
              "layer " + std::to_string(model_layer) + " of a " + std::to_string(views_.size()) + "-layer cache");
  return views_[model_layer];
}

// The pools are this object's own non-const bytes; the views merely hold
// their addresses as const (an attention kernel only reads).
std::byte* LocalModelKvCache::writable_k(uint32_t model_layer) {
  return const_cast<std::byte*>(layer_view(model_layer).k.base);
}
std::byte* LocalModelKvCache::writable_v(uint32_t model_layer) {
  return const_cast<std::byte*>(layer_view(model_layer).v.base);
}

Status LocalModelKvCache::read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row,
                                             std::span<uint8_t> out) const {
  if (group_index >= layout_.cache_groups.size())
    return make_error(
        ErrorCode::unknown_group,
        "group index " + std::to_string(group_index) + " of " + std::to_string(layout_.cache_groups.size()) + " groups",
        "group_index");
  if (slot >= slots_)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "slot " + std::to_string(slot) + " >= " + std::to_string(slots_) + " slots", "slot");
  if (row >= layout_.allocator_block_size)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "row " + std::to_string(row) + " >= P_a " + std::to_string(layout_.allocator_block_size), "row");
  const CacheGroupLayout& group = layout_.cache_groups[group_index];
  if (out.size() != group.row_bytes())
    return make_error(ErrorCode::invalid_argument,
                      "a canonical row of group index " + std::to_string(group_index) + " is " +
                          std::to_string(group.row_bytes()) + " bytes, not " + std::to_string(out.size()),
                      "out");
  gather_canonical_row(group, views_, slot, row, out);
  return Status::success();
}

}  // namespace kvrt::model
