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
                    const SequenceBlocks& to_blocks, uint32_t begin, uint32_t end) {
  if (from.layout().digest() != to.layout().digest())
    return make_error(ErrorCode::incompatible, "rows copy only between caches of one layout", "layout");
  const auto& groups = from.layout().cache_groups;
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
        auto d = locate(to_blocks, g, dst.block_tokens, t, "destination");
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

}  // namespace kvrt::model
