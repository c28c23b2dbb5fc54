#include "shm/pool_segment_header.hpp"

#include <cstring>
#include <string>

namespace kvrt::shm {
namespace {

Error corrupt(std::string reason, std::string field) {
  return make_error(ErrorCode::decode_failed, "pool segment header: " + std::move(reason), std::move(field));
}

}  // namespace

PoolSegmentHeader make_header(const PoolSegmentInfo& info) {
  PoolSegmentHeader h;
  std::memset(&h, 0, sizeof h);  // reserved fields and padding are zero, so equal inputs give equal bytes
  const PoolGeometry& g = info.geometry;
  const PoolShape& s = g.shape();
  h.magic = kPoolSegmentMagic;
  h.format_version = kPoolSegmentFormat;
  h.ready = 0;
  h.owner_pid = info.owner.pid;
  h.owner_start_time = info.owner.start_time_ticks;
  h.header_bytes = static_cast<uint32_t>(kHeaderBytes);
  h.pool_id = info.pool_id.value;
  h.pool_generation = info.pool_generation.value;
  h.cache_group_id = info.group.value;
  std::memcpy(h.layout_digest, info.layout_digest.bytes.data(), sizeof h.layout_digest);
  h.layers = s.layers;
  h.kv_heads = s.kv_heads;
  h.head_dim = s.head_dim;
  h.block_tokens = s.block_tokens;
  h.capacity_blocks = s.capacity_blocks;
  h.k_dtype = static_cast<uint8_t>(s.k_dtype);
  h.v_dtype = static_cast<uint8_t>(s.v_dtype);
  for (size_t p = 0; p < kTensorAxisCount; ++p) h.axis_order[p] = static_cast<uint8_t>(s.axis_order[p]);
  h.k_offset = g.tensor_offset(TensorKind::K);
  h.k_bytes = g.tensor_bytes(TensorKind::K);
  h.v_offset = g.tensor_offset(TensorKind::V);
  h.v_bytes = g.tensor_bytes(TensorKind::V);
  h.segment_bytes = g.segment_bytes();
  return h;
}

Result<PoolSegmentInfo> decode_header(const PoolSegmentHeader& h, uint64_t file_bytes) {
  if (h.magic != kPoolSegmentMagic) return corrupt("bad magic (not a kvrt pool segment)", "magic");
  if (h.format_version != kPoolSegmentFormat)
    return make_error(ErrorCode::incompatible,
                      "pool segment format " + std::to_string(h.format_version) + ", this build reads format " +
                          std::to_string(kPoolSegmentFormat),
                      "format_version");
  if (h.ready != 1) return corrupt("not published (ready flag unset)", "ready");
  if (h.header_bytes != kHeaderBytes)
    return corrupt("header_bytes " + std::to_string(h.header_bytes) + ", expected " + std::to_string(kHeaderBytes),
                   "header_bytes");

  // Rebuild the geometry from the recorded shape; the offsets the owner wrote
  // must be exactly the ones this build derives, or the two disagree on bytes.
  PoolShape s;
  s.layers = h.layers;
  s.kv_heads = h.kv_heads;
  s.head_dim = h.head_dim;
  s.block_tokens = h.block_tokens;
  s.capacity_blocks = h.capacity_blocks;
  const auto max_dtype = static_cast<uint8_t>(ScalarType::int8);
  if (h.k_dtype > max_dtype) return corrupt("unknown K dtype " + std::to_string(h.k_dtype), "k_dtype");
  if (h.v_dtype > max_dtype) return corrupt("unknown V dtype " + std::to_string(h.v_dtype), "v_dtype");
  s.k_dtype = static_cast<ScalarType>(h.k_dtype);
  s.v_dtype = static_cast<ScalarType>(h.v_dtype);
  for (size_t p = 0; p < kTensorAxisCount; ++p) {
    if (h.axis_order[p] >= kTensorAxisCount) return corrupt("unknown axis in axis_order", "axis_order");
    s.axis_order[p] = static_cast<TensorAxis>(h.axis_order[p]);
  }
  auto geometry = PoolGeometry::plan(s);
  if (!geometry.ok()) return corrupt(geometry.error().reason, geometry.error().field);
  const PoolGeometry& g = *geometry;
  if (h.k_offset != g.tensor_offset(TensorKind::K) || h.k_bytes != g.tensor_bytes(TensorKind::K) ||
      h.v_offset != g.tensor_offset(TensorKind::V) || h.v_bytes != g.tensor_bytes(TensorKind::V) ||
      h.segment_bytes != g.segment_bytes())
    return corrupt("recorded K/V ranges differ from the ones the recorded shape implies", "k_offset");
  if (file_bytes != h.segment_bytes)
    return corrupt("segment is " + std::to_string(file_bytes) + " bytes, header records " +
                       std::to_string(h.segment_bytes) + (file_bytes < h.segment_bytes ? " (truncated)" : ""),
                   "segment_bytes");

  PoolSegmentInfo info{PoolId{h.pool_id},
                       PoolGeneration{h.pool_generation},
                       CacheGroupId{h.cache_group_id},
                       Sha256Digest{},
                       ProcessIdentity{h.owner_pid, h.owner_start_time},
                       g};
  std::memcpy(info.layout_digest.bytes.data(), h.layout_digest, sizeof h.layout_digest);
  return info;
}

}  // namespace kvrt::shm
