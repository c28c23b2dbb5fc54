#include "shm/pool_geometry.hpp"

#include <string>

namespace kvrt::shm {
namespace {

using u128 = unsigned __int128;

constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Error out_of_range(std::string field, uint64_t value, uint64_t limit) {
  return make_error(ErrorCode::coordinate_out_of_range,
                    field + " " + std::to_string(value) + " is outside [0, " + std::to_string(limit) + ")", field);
}

bool known_dtype(ScalarType t) { return static_cast<uint8_t>(t) <= static_cast<uint8_t>(ScalarType::int8); }

// Declared position of an axis in the shape's order (validated permutation).
size_t position_of(const std::array<TensorAxis, kTensorAxisCount>& order, TensorAxis axis) {
  for (size_t p = 0; p < kTensorAxisCount; ++p)
    if (order[p] == axis) return p;
  KVRT_ASSERT(false, "axis missing from a validated axis order");
  return 0;
}

}  // namespace

Result<uint32_t> capacity_in_blocks(const CacheLayoutManifest& manifest, PoolCapacity capacity) {
  KVRT_TRY(manifest.validate());
  uint64_t blocks = capacity.amount;
  if (capacity.unit == PoolCapacity::Unit::bytes) {
    const u128 bundle = u128{manifest.row_bytes()} * manifest.allocator_block_size;  // [bytes / bundle]
    if (bundle == 0 || bundle > UINT64_MAX)
      return make_error(ErrorCode::invalid_manifest, "bundle bytes P_a * B_row is zero or exceeds 64 bits",
                        "allocator_block_size");
    blocks = capacity.amount / static_cast<uint64_t>(bundle);
    if (blocks == 0)
      return make_error(ErrorCode::config_field,
                        std::to_string(capacity.amount) + " bytes buy no whole bundle of " +
                            std::to_string(static_cast<uint64_t>(bundle)) + " bytes",
                        "capacity");
  }
  if (blocks == 0) return make_error(ErrorCode::config_field, "a pool needs at least one block", "capacity");
  if (blocks > UINT32_MAX)
    return make_error(ErrorCode::config_field, std::to_string(blocks) + " blocks exceed the 32-bit physical slot index",
                      "capacity");
  return static_cast<uint32_t>(blocks);
}

Result<PoolShape> pool_shape(const CacheLayoutManifest& manifest, CacheGroupId group, uint32_t capacity_blocks) {
  KVRT_TRY(manifest.validate());
  const CacheGroupLayout* g = manifest.group(group);
  if (g == nullptr)
    return make_error(ErrorCode::unknown_group,
                      "cache group " + std::to_string(group.value) + " is not in the manifest", "cache_group");
  PoolShape s;
  s.layers = g->layers();
  s.kv_heads = g->kv_heads_local;
  s.head_dim = g->head_dim;
  s.k_dtype = g->k_dtype;
  s.v_dtype = g->v_dtype;
  for (size_t p = 0; p < kTensorAxisCount; ++p) s.axis_order[p] = g->axis_order[p];
  s.block_tokens = manifest.allocator_block_size;
  s.capacity_blocks = capacity_blocks;
  return s;
}

uint64_t RowRuns::run_count() const {
  if (run_bytes_ == 0) return 0;
  uint64_t n = 1;
  for (uint32_t a = 0; a < outer_axes_; ++a) n *= outer_extent_[a];
  return n;
}

Result<PoolGeometry> PoolGeometry::plan(const PoolShape& shape) {
  const std::pair<const char*, uint32_t> extents[] = {{"layers", shape.layers},
                                                      {"kv_heads", shape.kv_heads},
                                                      {"head_dim", shape.head_dim},
                                                      {"block_tokens", shape.block_tokens},
                                                      {"capacity_blocks", shape.capacity_blocks}};
  for (const auto& [field, value] : extents)
    if (value == 0) return make_error(ErrorCode::invalid_argument, std::string(field) + " is zero", field);
  if (!known_dtype(shape.k_dtype)) return make_error(ErrorCode::invalid_argument, "unknown K dtype", "k_dtype");
  if (!known_dtype(shape.v_dtype)) return make_error(ErrorCode::invalid_argument, "unknown V dtype", "v_dtype");
  std::array<bool, kTensorAxisCount> seen{};
  for (TensorAxis a : shape.axis_order) {
    const auto i = static_cast<size_t>(a);
    if (i >= kTensorAxisCount || seen[i])
      return make_error(ErrorCode::invalid_argument, "axis order is not a permutation of the five axes", "axis_order");
    seen[i] = true;
  }

  // The address module builds shape and strides from a group layout; a
  // group-local layout (layer_start 0) carries exactly the recorded extents.
  CacheGroupLayout layout;
  layout.layer_start = 0;
  layout.layer_end = shape.layers;
  layout.kv_heads_local = shape.kv_heads;
  layout.head_dim = shape.head_dim;
  layout.k_dtype = shape.k_dtype;
  layout.v_dtype = shape.v_dtype;
  layout.axis_order.assign(shape.axis_order.begin(), shape.axis_order.end());
  auto tensor = tensor_geometry(layout, shape.block_tokens, shape.capacity_blocks);
  if (!tensor)
    return make_error(ErrorCode::storage_exhausted, "tensor element count exceeds 64 bits", "capacity_blocks");

  PoolGeometry g;
  g.shape_ = shape;
  g.tensor_ = *tensor;
  const u128 k_bytes = u128{tensor->elements} * kvrt::scalar_bytes(shape.k_dtype);
  const u128 v_bytes = u128{tensor->elements} * kvrt::scalar_bytes(shape.v_dtype);
  // Both tensors plus the header and two alignment pads must stay far below
  // 2^64 so the aligned sums below cannot wrap.
  if (k_bytes + v_bytes + kHeaderBytes + 2 * kTensorAlignment >= (u128{1} << 63))
    return make_error(ErrorCode::storage_exhausted,
                      "K plus V bytes exceed 2^63 for " + std::to_string(shape.capacity_blocks) + " blocks",
                      "capacity_blocks");
  g.k_offset_ = align_up(kHeaderBytes, kTensorAlignment);
  g.k_bytes_ = static_cast<uint64_t>(k_bytes);
  g.v_offset_ = align_up(g.k_offset_ + g.k_bytes_, kTensorAlignment);
  g.v_bytes_ = static_cast<uint64_t>(v_bytes);
  g.segment_bytes_ = align_up(g.v_offset_ + g.v_bytes_, kTensorAlignment);
  return g;
}

uint32_t PoolGeometry::scalar_bytes(TensorKind kind) const {
  return kvrt::scalar_bytes(kind == TensorKind::K ? shape_.k_dtype : shape_.v_dtype);
}

uint64_t PoolGeometry::block_bytes() const {
  return uint64_t{shape_.block_tokens} * shape_.layers * shape_.kv_heads * shape_.head_dim *
         (scalar_bytes(TensorKind::K) + scalar_bytes(TensorKind::V));
}

Result<uint64_t> PoolGeometry::byte_offset(PhysicalSlot block, const KvCoordinate& c) const {
  if (block.value >= shape_.capacity_blocks) return out_of_range("block_id", block.value, shape_.capacity_blocks);
  if (c.layer_local >= shape_.layers) return out_of_range("layer_local", c.layer_local, shape_.layers);
  if (c.token_offset >= shape_.block_tokens) return out_of_range("token_offset", c.token_offset, shape_.block_tokens);
  if (c.kv_head >= shape_.kv_heads) return out_of_range("kv_head", c.kv_head, shape_.kv_heads);
  if (c.lane >= shape_.head_dim) return out_of_range("lane", c.lane, shape_.head_dim);
  AxisValues by_axis{};
  by_axis[static_cast<size_t>(TensorAxis::layer_local)] = c.layer_local;
  by_axis[static_cast<size_t>(TensorAxis::physical_slot)] = block.value;
  by_axis[static_cast<size_t>(TensorAxis::token_offset)] = c.token_offset;
  by_axis[static_cast<size_t>(TensorAxis::kv_head)] = c.kv_head;
  by_axis[static_cast<size_t>(TensorAxis::head_dim)] = c.lane;
  const uint64_t element = tensor_.element_offset(tensor_.declared(by_axis));  // E_g [elements]
  return tensor_offset(c.kind) + uint64_t{scalar_bytes(c.kind)} * element;     // base + b * E_g
}

Result<ByteRun> PoolGeometry::lane_run(PhysicalSlot block, const KvCoordinate& c, uint32_t lane_count) const {
  if (lane_count == 0) return make_error(ErrorCode::invalid_argument, "lane_count is zero", "lane_count");
  uint64_t offset = 0;
  KVRT_TRY_ASSIGN(offset, byte_offset(block, c));
  if (uint64_t{c.lane} + lane_count > shape_.head_dim)
    return out_of_range("lane_count", uint64_t{c.lane} + lane_count - 1, shape_.head_dim);
  const size_t lane_pos = position_of(shape_.axis_order, TensorAxis::head_dim);
  if (lane_count > 1 && tensor_.strides[lane_pos] != 1)
    return make_error(ErrorCode::invalid_argument,
                      "lanes of one head are not contiguous: head_dim is not the innermost axis", "lane_count");
  return ByteRun{offset, uint64_t{lane_count} * scalar_bytes(c.kind)};
}

Result<RowRuns> PoolGeometry::row_runs(PhysicalSlot block, TensorKind kind, uint32_t token_begin,
                                       uint32_t token_end) const {
  if (block.value >= shape_.capacity_blocks) return out_of_range("block_id", block.value, shape_.capacity_blocks);
  if (token_begin > token_end || token_end > shape_.block_tokens)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "token range [" + std::to_string(token_begin) + ", " + std::to_string(token_end) +
                          ") is not inside [0, " + std::to_string(shape_.block_tokens) + "]",
                      "token_range");
  RowRuns runs;
  if (token_begin == token_end) return runs;

  // The box covered, per axis: one slot, the token range, everything else whole.
  AxisValues low{}, count{};
  for (size_t a = 0; a < kTensorAxisCount; ++a) count[a] = tensor_.extent(static_cast<TensorAxis>(a));
  low[static_cast<size_t>(TensorAxis::physical_slot)] = block.value;
  count[static_cast<size_t>(TensorAxis::physical_slot)] = 1;
  low[static_cast<size_t>(TensorAxis::token_offset)] = token_begin;
  count[static_cast<size_t>(TensorAxis::token_offset)] = token_end - token_begin;
  const auto box_low = tensor_.declared(low);
  const auto box_count = tensor_.declared(count);
  const uint64_t b = scalar_bytes(kind);

  // Fuse fully covered innermost axes, then the first partial one, into a run.
  size_t pos = kTensorAxisCount;
  uint64_t run_elements = 1;
  while (pos > 0 && box_count[pos - 1] == tensor_.shape[pos - 1]) run_elements *= tensor_.shape[--pos];
  if (pos > 0) run_elements *= box_count[--pos];
  runs.first_offset_ = tensor_offset(kind) + b * tensor_.element_offset(box_low);
  runs.run_bytes_ = run_elements * b;
  for (size_t p = 0; p < pos; ++p) {
    if (box_count[p] == 1) continue;
    runs.outer_extent_[runs.outer_axes_] = box_count[p];
    runs.outer_stride_bytes_[runs.outer_axes_] = tensor_.strides[p] * b;
    ++runs.outer_axes_;
  }
  return runs;
}

}  // namespace kvrt::shm
