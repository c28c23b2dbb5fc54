#pragma once
// Shape and row-major strides of one cache group's K or V tensor, taken from
// the layout manifest's declared axis order (spec 0x03E):
//
//   stride[a]      = product(shape[b] for b > a)          [elements]
//   element_offset = sum(coordinate[a] * stride[a])       [elements]
//   byte_offset    = scalar_bytes * element_offset        [bytes]
//
// The axis order is the backend ABI: the same logical coordinate lands on a
// different element under a different order, so nothing here assumes one.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

// Which of a group's two tensors a read targets (separate bases, 0x03E). An
// interleaved K/V layout would add a kv_kind axis instead; none is declared.
enum class TensorKind : uint8_t { K = 0, V = 1 };
std::string_view to_string(TensorKind kind);
std::optional<TensorKind> tensor_kind_from_string(std::string_view s);  // "K" or "V"

// One value per TensorAxis, indexed by the axis enum (not by declared order).
using AxisValues = std::array<uint64_t, kTensorAxisCount>;

struct TensorGeometry {
  std::array<TensorAxis, kTensorAxisCount> axis_order{};  // outermost first
  std::array<uint64_t, kTensorAxisCount> shape{};         // [extent] in declared order
  std::array<uint64_t, kTensorAxisCount> strides{};       // [elements] in declared order
  uint64_t elements = 0;                                  // product of shape

  // Extent of one axis, whatever its position.
  uint64_t extent(TensorAxis axis) const;
  // Reorders axis-indexed values into declared order (the coordinate vector I_g).
  std::array<uint64_t, kTensorAxisCount> declared(const AxisValues& by_axis) const;
  // E_g = sum_a I_a * S_a over a declared-order coordinate [elements].
  uint64_t element_offset(const std::array<uint64_t, kTensorAxisCount>& coordinate) const;
};

// Extents per axis for a group whose pool provisions `slot_count` physical
// blocks of `block_size` token rows:
//   layer_local = L_g, physical_slot = slot_count, token_offset = P,
//   kv_head = H_kv,local, head_dim = d_h.
// Returns nullopt when the element count overflows 64 bits (a caller error
// the snapshot validator reports).
std::optional<TensorGeometry> tensor_geometry(const CacheGroupLayout& group, uint32_t block_size, uint32_t slot_count);

// S_a = prod_{b > a} D_b for a declared-order shape (row-major, 0x03E).
std::array<uint64_t, kTensorAxisCount> row_major_strides(const std::array<uint64_t, kTensorAxisCount>& shape);

// Scalar width of the group's K or V dtype [bytes / element].
uint32_t tensor_scalar_bytes(const CacheGroupLayout& group, TensorKind kind);

}  // namespace kvrt
