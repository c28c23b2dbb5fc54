// copy_kv_rows: token rows moved between two caches of one layout. See
// model_kv_cache.hpp.
#include <cstring>

#include "engine/model/model_kv_cache.hpp"

namespace kvrt::model {

namespace {

// The slot and in-block row of token row `t` of a table, or an error.
Result<std::pair<uint32_t, uint32_t>> locate(const SequenceBlocks& blocks, size_t group, uint32_t block_tokens,
                                             uint32_t t, const char* side) {
  const uint32_t j = t / block_tokens;
  if (group >= blocks.slots.size() || j >= blocks.slots[group].size())
    return make_error(ErrorCode::coordinate_out_of_range,
                      std::string("row ") + std::to_string(t) + " lies past the " + side + " table", "blocks");
  return std::make_pair(blocks.slots[group][j], t % block_tokens);
}

void copy_head(const executor::KvTensorView& src, uint32_t src_slot, uint32_t src_row,
               const executor::KvTensorView& dst, std::byte* dst_base, uint32_t dst_slot, uint32_t dst_row,
               uint32_t head) {
  const uint32_t b = src.scalar_bytes();
  const std::byte* s = src.row(src_slot, src_row, head);
  std::byte* d = dst_base + (dst.row(dst_slot, dst_row, head) - dst.base);
  if (src.lane_stride == 1 && dst.lane_stride == 1) {
    std::memcpy(d, s, uint64_t{src.head_dim} * b);
    return;
  }
  for (uint32_t x = 0; x < src.head_dim; ++x)
    std::memcpy(d + uint64_t{x} * dst.lane_stride * b, s + uint64_t{x} * src.lane_stride * b, b);
}

}  // namespace

Status copy_kv_rows(const ModelKvCache& from, const SequenceBlocks& from_blocks, ModelKvCache& to,
                    const SequenceBlocks& to_blocks, uint32_t begin, uint32_t end, std::optional<uint32_t> to_begin) {
  const uint32_t first = to_begin.value_or(begin);  // destination row of row `begin`
  if (end > begin && uint64_t{first} + (end - begin) > UINT32_MAX)
    return make_error(ErrorCode::coordinate_out_of_range, "destination rows run past 2^32", "to_begin");
  if (from.layout().digest() != to.layout().digest())
    return make_error(ErrorCode::incompatible, "rows copy only between caches of one layout", "layout");
  const auto& groups = from.layout().cache_groups;
  // Every row is located before any is written: a refused copy writes nothing.
  if (end > begin)
    for (size_t g = 0; g < groups.size(); ++g) {
      const uint32_t layer = groups[g].layer_start;
      KVRT_TRY(locate(from_blocks, g, from.layer_view(layer).block_tokens, end - 1, "source"));
      KVRT_TRY(locate(to_blocks, g, to.layer_view(layer).block_tokens, first + (end - 1 - begin), "destination"));
    }
  for (size_t g = 0; g < groups.size(); ++g) {
    const CacheGroupLayout& group = groups[g];
    for (uint32_t layer = group.layer_start; layer < group.layer_end; ++layer) {
      const executor::PagedKvView& src = from.layer_view(layer);
      const executor::PagedKvView& dst = to.layer_view(layer);
      std::byte* dst_k = to.writable_k(layer);
      std::byte* dst_v = to.writable_v(layer);
      for (uint32_t t = begin; t < end; ++t) {
        auto s = locate(from_blocks, g, src.block_tokens, t, "source");
        if (!s.ok()) return s.error();
        auto d = locate(to_blocks, g, dst.block_tokens, first + (t - begin), "destination");
        if (!d.ok()) return d.error();
        for (uint32_t h = 0; h < group.kv_heads_local; ++h) {
          copy_head(src.k, s->first, s->second, dst.k, dst_k, d->first, d->second, h);
          copy_head(src.v, s->first, s->second, dst.v, dst_v, d->first, d->second, h);
        }
      }
    }
  }
  return Status::success();
}

Status write_canonical_row(ModelKvCache& to, uint32_t group_index, uint32_t slot, uint32_t row,
                           std::span<const uint8_t> in) {
  const auto& groups = to.layout().cache_groups;
  if (group_index >= groups.size())
    return make_error(ErrorCode::unknown_group,
                      "group index " + std::to_string(group_index) + " of " + std::to_string(groups.size()) + " groups",
                      "group_index");
  const CacheGroupLayout& group = groups[group_index];
  if (in.size() != group.row_bytes())
    return make_error(
        ErrorCode::invalid_argument,
        "a canonical row is " + std::to_string(group.row_bytes()) + " bytes, not " + std::to_string(in.size()), "in");
  if (slot >= to.slot_count() || row >= to.layout().allocator_block_size)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "block " + std::to_string(slot) + " row " + std::to_string(row) + " is outside the cache",
                      slot >= to.slot_count() ? "slot" : "row");
  // The canonical order of gather_canonical_row: all of K, then all of V,
  // each layer-major, then kv_head, then lane.
  const uint8_t* src = in.data();
  for (int kind = 0; kind < 2; ++kind)
    for (uint32_t layer = group.layer_start; layer < group.layer_end; ++layer) {
      const executor::PagedKvView& view = to.layer_view(layer);
      const executor::KvTensorView& t = kind == 0 ? view.k : view.v;
      std::byte* base = kind == 0 ? to.writable_k(layer) : to.writable_v(layer);
      const uint32_t b = t.scalar_bytes();
      for (uint32_t h = 0; h < group.kv_heads_local; ++h) {
        std::byte* dst = base + (t.row(slot, row, h) - t.base);
        for (uint32_t x = 0; x < t.head_dim; ++x, src += b) std::memcpy(dst + uint64_t{x} * t.lane_stride * b, src, b);
      }
    }
  return Status::success();
}

}  // namespace kvrt::model
