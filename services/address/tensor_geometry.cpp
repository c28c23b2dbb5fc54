#include "services/address/tensor_geometry.hpp"

namespace kvrt {

std::string_view to_string(TensorKind kind) { return kind == TensorKind::K ? "K" : "V"; }

std::optional<TensorKind> tensor_kind_from_string(std::string_view s) {
  if (s == "K" || s == "k") return TensorKind::K;
  if (s == "V" || s == "v") return TensorKind::V;
  return std::nullopt;
}

uint64_t TensorGeometry::extent(TensorAxis axis) const {
  for (size_t a = 0; a < kTensorAxisCount; ++a)
    if (axis_order[a] == axis) return shape[a];
  KVRT_ASSERT(false, "axis " + std::string(to_string(axis)) + " missing from a validated axis order");
  return 0;
}

std::array<uint64_t, kTensorAxisCount> TensorGeometry::declared(const AxisValues& by_axis) const {
  std::array<uint64_t, kTensorAxisCount> out{};
  for (size_t a = 0; a < kTensorAxisCount; ++a) out[a] = by_axis[static_cast<size_t>(axis_order[a])];
  return out;
}

uint64_t TensorGeometry::element_offset(const std::array<uint64_t, kTensorAxisCount>& coordinate) const {
  uint64_t e = 0;
  for (size_t a = 0; a < kTensorAxisCount; ++a) e += coordinate[a] * strides[a];
  return e;
}

std::array<uint64_t, kTensorAxisCount> row_major_strides(const std::array<uint64_t, kTensorAxisCount>& shape) {
  std::array<uint64_t, kTensorAxisCount> strides{};
  uint64_t running = 1;
  for (size_t a = kTensorAxisCount; a-- > 0;) {
    strides[a] = running;
    running *= shape[a];
  }
  return strides;
}

std::optional<TensorGeometry> tensor_geometry(const CacheGroupLayout& group, uint32_t block_size, uint32_t slot_count) {
  KVRT_ASSERT(group.axis_order.size() == kTensorAxisCount, "tensor_geometry needs a validated axis order");
  AxisValues by_axis{};
  by_axis[static_cast<size_t>(TensorAxis::layer_local)] = group.layers();
  by_axis[static_cast<size_t>(TensorAxis::physical_slot)] = slot_count;
  by_axis[static_cast<size_t>(TensorAxis::token_offset)] = block_size;
  by_axis[static_cast<size_t>(TensorAxis::kv_head)] = group.kv_heads_local;
  by_axis[static_cast<size_t>(TensorAxis::head_dim)] = group.head_dim;

  TensorGeometry g;
  for (size_t a = 0; a < kTensorAxisCount; ++a) g.axis_order[a] = group.axis_order[a];
  g.shape = g.declared(by_axis);
  // The element count (and so the largest stride) must fit; every extent is
  // below 2^32, so a checked running product is enough.
  unsigned __int128 total = 1;
  for (uint64_t d : g.shape) {
    total *= d;
    if (total > UINT64_MAX) return std::nullopt;
  }
  g.elements = static_cast<uint64_t>(total);
  g.strides = row_major_strides(g.shape);
  return g;
}

uint32_t tensor_scalar_bytes(const CacheGroupLayout& group, TensorKind kind) {
  return scalar_bytes(kind == TensorKind::K ? group.k_dtype : group.v_dtype);
}

}  // namespace kvrt
