#include "services/executor/kv_view.hpp"

#include <string>

#include "services/executor/scalar_convert.hpp"

namespace kvrt::executor {
namespace {

// Largest element offset any in-extent coordinate reaches, plus one
// [elements]. Extents and strides are from validated geometry; the product is
// computed in 128 bits so an absurd view is refused, not wrapped.
unsigned __int128 reach(const KvTensorView& t, uint64_t slots, uint64_t tokens, uint64_t heads) {
  using U = unsigned __int128;
  return U(slots - 1) * t.slot_stride + U(tokens - 1) * t.token_stride + U(heads - 1) * t.head_stride +
         U(t.head_dim - 1) * t.lane_stride + 1;
}

Status check_bytes(const KvTensorView& t, uint64_t bytes, unsigned __int128 from_base_elements,
                   const std::string& field) {
  const unsigned __int128 need = from_base_elements * t.scalar_bytes();
  if (need > bytes)
    return make_error(ErrorCode::executor_view_out_of_bounds,
                      "the view reaches " + std::to_string(uint64_t(need)) + " bytes but only " +
                          std::to_string(bytes) + " were given",
                      field);
  return Status::success();
}

Status check_source(const KvTensorBytes& s, TensorKind kind) {
  const bool is_k = kind == TensorKind::K;
  if (s.data == nullptr)
    return make_error(ErrorCode::invalid_argument, "null tensor pointer", is_k ? "k.data" : "v.data");
  return check_storage_dtype(s.dtype, is_k ? "k.dtype" : "v.dtype");
}

}  // namespace

Result<PagedKvView> paged_kv_view(const TensorGeometry& g, uint32_t layer_local, KvTensorBytes k, KvTensorBytes v) {
  KVRT_TRY(check_source(k, TensorKind::K));
  KVRT_TRY(check_source(v, TensorKind::V));
  auto stride_of = [&](TensorAxis axis) {
    for (size_t a = 0; a < kTensorAxisCount; ++a)
      if (g.axis_order[a] == axis) return g.strides[a];
    return uint64_t{0};
  };
  const uint64_t layers = g.extent(TensorAxis::layer_local);
  if (layer_local >= layers)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "layer_local " + std::to_string(layer_local) + " >= L_g " + std::to_string(layers),
                      "layer_local");
  PagedKvView view;
  view.block_tokens = static_cast<uint32_t>(g.extent(TensorAxis::token_offset));
  view.slot_count = static_cast<uint32_t>(g.extent(TensorAxis::physical_slot));
  view.kv_heads = static_cast<uint32_t>(g.extent(TensorAxis::kv_head));
  const uint64_t layer_offset = uint64_t{layer_local} * stride_of(TensorAxis::layer_local);  // [elements]
  auto make = [&](const KvTensorBytes& s) {
    KvTensorView t;
    t.base = s.data + layer_offset * scalar_bytes(s.dtype);
    t.dtype = s.dtype;
    t.head_dim = static_cast<uint32_t>(g.extent(TensorAxis::head_dim));
    t.slot_stride = stride_of(TensorAxis::physical_slot);
    t.token_stride = stride_of(TensorAxis::token_offset);
    t.head_stride = stride_of(TensorAxis::kv_head);
    t.lane_stride = stride_of(TensorAxis::head_dim);
    return t;
  };
  view.k = make(k);
  view.v = make(v);
  if (view.block_tokens == 0 || view.slot_count == 0 || view.kv_heads == 0 || view.k.head_dim == 0)
    return make_error(ErrorCode::invalid_argument, "geometry has a zero extent", "geometry");
  const auto from_base = [&](const KvTensorView& t) {
    return reach(t, view.slot_count, view.block_tokens, view.kv_heads) + layer_offset;
  };
  KVRT_TRY(check_bytes(view.k, k.bytes, from_base(view.k), "k.bytes"));
  KVRT_TRY(check_bytes(view.v, v.bytes, from_base(view.v), "v.bytes"));
  return view;
}

Result<PagedKvView> paged_kv_view(const TranslationSnapshot& snapshot, uint32_t model_layer) {
  const CacheGroupLayout* group = snapshot.layout.group_for_layer(model_layer);
  if (group == nullptr)
    return make_error(ErrorCode::layer_gap, "model layer " + std::to_string(model_layer) + " is in no cache group",
                      "model_layer");
  const GroupPool* pool = snapshot.pool(group->group_id);
  if (pool == nullptr)
    return make_error(ErrorCode::unknown_group, "cache group " + std::to_string(group->group_id.value) + " has no pool",
                      "pools");
  const TensorGeometry geometry = snapshot.geometry(*group, *pool);
  auto bytes_of = [&](TensorKind kind) {
    const uint64_t base = pool->base(kind);
    return KvTensorBytes{reinterpret_cast<const std::byte*>(base), snapshot.tensor_end(*group, *pool, kind) - base,
                         kind == TensorKind::K ? group->k_dtype : group->v_dtype};
  };
  return paged_kv_view(geometry, model_layer - group->layer_start, bytes_of(TensorKind::K), bytes_of(TensorKind::V));
}

Result<PagedKvView> plain_kv_view(const PlainPoolShape& s, KvTensorBytes k, KvTensorBytes v) {
  if (s.slot_count == 0 || s.block_tokens == 0 || s.kv_heads == 0 || s.qk_dim == 0 || s.v_dim == 0)
    return make_error(ErrorCode::invalid_argument, "every extent of a plain pool must be positive", "shape");
  k.dtype = s.k_dtype;
  v.dtype = s.v_dtype;
  KVRT_TRY(check_source(k, TensorKind::K));
  KVRT_TRY(check_source(v, TensorKind::V));
  PagedKvView view;
  view.block_tokens = s.block_tokens;
  view.slot_count = s.slot_count;
  view.kv_heads = s.kv_heads;
  auto make = [&](const KvTensorBytes& b, uint32_t dim) {
    KvTensorView t;
    t.base = b.data;
    t.dtype = b.dtype;
    t.head_dim = dim;
    t.lane_stride = 1;
    t.head_stride = dim;
    t.token_stride = uint64_t{s.kv_heads} * dim;
    t.slot_stride = t.token_stride * s.block_tokens;
    return t;
  };
  view.k = make(k, s.qk_dim);
  view.v = make(v, s.v_dim);
  KVRT_TRY(check_bytes(view.k, k.bytes, reach(view.k, s.slot_count, s.block_tokens, s.kv_heads), "k.bytes"));
  KVRT_TRY(check_bytes(view.v, v.bytes, reach(view.v, s.slot_count, s.block_tokens, s.kv_heads), "v.bytes"));
  return view;
}

Result<PagedKvView> contiguous_kv_view(const MapperGeometry& geometry, const std::byte* reservation_base,
                                       uint32_t layer, ScalarType dtype) {
  const MapperConfig& c = geometry.config();
  if (reservation_base == nullptr)
    return make_error(ErrorCode::invalid_argument, "null reservation base", "reservation_base");
  KVRT_TRY(check_storage_dtype(dtype, "dtype"));
  if (scalar_bytes(dtype) != c.element_bytes)
    return make_error(ErrorCode::config_field,
                      std::string(to_string(dtype)) + " is " + std::to_string(scalar_bytes(dtype)) +
                          " bytes but the mapper declares b = " + std::to_string(c.element_bytes),
                      "dtype");
  if (layer >= c.local_layers)
    return make_error(ErrorCode::coordinate_out_of_range,
                      "layer " + std::to_string(layer) + " >= L " + std::to_string(c.local_layers), "layer");
  PagedKvView view;
  view.block_tokens = c.max_tokens;
  view.slot_count = c.request_slots;
  view.kv_heads = c.kv_heads;
  auto make = [&](KvTensorKind kind) {
    KvTensorView t;
    // 0x06C: tensor 2*layer + kind starts at tensor_index * (B * R) bytes.
    t.base = reservation_base + geometry.page_offset(geometry.tensor_index(layer, kind), 0, 0);
    t.dtype = dtype;
    t.head_dim = c.head_dim;
    t.lane_stride = 1;
    t.head_stride = c.head_dim;
    t.token_stride = uint64_t{c.kv_heads} * c.head_dim;
    t.slot_stride = geometry.slot_range_bytes() / c.element_bytes;  // R is a multiple of G, hence of b
    return t;
  };
  view.k = make(KvTensorKind::key);
  view.v = make(KvTensorKind::value);
  return view;
}

double load_element(const KvTensorView& t, uint64_t slot, uint64_t token, uint32_t head, uint32_t lane) {
  const std::byte* p = t.row(slot, token, head) + uint64_t{lane} * t.lane_stride * t.scalar_bytes();
  return load_scalar(t.dtype, p);
}

}  // namespace kvrt::executor
