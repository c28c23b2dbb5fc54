#pragma once
// What an attention kernel reads: one layer's K and V tensors of one cache
// group, as a host base pointer plus element strides (spec 0x03E). The same
// view describes a shared-memory block pool (shm/BlockPoolSegment), a plain
// process-local buffer, or the mapper's contiguous virtual tensors (0x0BJ),
// so one kernel serves all three; only the strides differ.
//
//   element (slot s, token row o, K/V head h, lane x) of this layer lives at
//   base + scalar_bytes * (s*slot_stride + o*token_stride + h*head_stride + x*lane_stride)
//
// where "slot" is the physical block slot of a paged pool (P_a token rows per
// slot), or the request slot of a contiguous reservation (T_max rows per
// slot). The view is non-owning: whoever maps the bytes keeps them alive while
// kernels run (FlashInfer's paged_kv_t habit: views, never owners).
//
// A factory checks, once, that every coordinate inside the extents lands
// inside the bytes it was given (executor_view_out_of_bounds otherwise), so
// the kernels index without per-element bounds checks. A view is a value: a
// later engineer's model or actor can keep one per layer.
#include <cstddef>
#include <cstdint>

#include "services/address/tensor_geometry.hpp"
#include "services/address/translation_snapshot.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/mapper/mapper_geometry.hpp"

namespace kvrt::executor {

struct KvTensorView {
  const std::byte* base = nullptr;  // element (slot 0, row 0, head 0, lane 0) of this layer
  ScalarType dtype = ScalarType::fp32;
  uint32_t head_dim = 0;      // lanes per head, d_qk for K and d_v for V [scalars]
  uint64_t slot_stride = 0;   // [elements] between slots
  uint64_t token_stride = 0;  // [elements] between token rows of one slot
  uint64_t head_stride = 0;   // [elements] between K/V heads
  uint64_t lane_stride = 0;   // [elements] between lanes; 1 is the contiguous fast path

  // fp32 is 4 bytes, fp16/bf16 2 (the storage dtypes a view can hold);
  // inline because every row address needs it.
  uint32_t scalar_bytes() const {
    return dtype == ScalarType::fp32 ? 4 : dtype == ScalarType::fp8_e4m3 || dtype == ScalarType::int8 ? 1 : 2;
  }
  // First lane of one row of one head [byte address].
  const std::byte* row(uint64_t slot, uint64_t token, uint32_t head) const {
    return base + (slot * slot_stride + token * token_stride + uint64_t{head} * head_stride) * scalar_bytes();
  }
};

struct PagedKvView {
  KvTensorView k;
  KvTensorView v;
  uint32_t block_tokens = 0;  // P_a: token rows per slot [tokens / block]
  uint32_t slot_count = 0;    // provisioned slots [blocks]
  uint32_t kv_heads = 0;      // H_kv, local [heads]
};

// Host bytes of one K or V tensor: all layers, as a pool or translator lays
// them out (a BlockPoolSegment's bytes({tensor_offset, tensor_bytes})).
struct KvTensorBytes {
  const std::byte* data = nullptr;
  uint64_t bytes = 0;  // [bytes]
  ScalarType dtype = ScalarType::fp32;
};

// A group's K/V tensors under the address translator's geometry (shape and
// strides in the declared axis order, 0x03E), restricted to one group-local
// layer. K and V share the geometry (shm/pool_geometry.hpp), and may differ
// in dtype. Errors: executor_unsupported_dtype ("k.dtype"/"v.dtype"),
// coordinate_out_of_range ("layer_local"), executor_view_out_of_bounds
// ("k.bytes"/"v.bytes") when a tensor's bytes are fewer than its elements
// need, invalid_argument for a null pointer.
Result<PagedKvView> paged_kv_view(const TensorGeometry& geometry, uint32_t layer_local, KvTensorBytes k,
                                  KvTensorBytes v);

// The view of one model layer of a TranslationSnapshot whose pools' k_base and
// v_base are host addresses of this process (a snapshot built over mapped
// pools; the translator itself never dereferences them). Errors: layer_gap for
// a layer in no group, unknown_group for a group without a pool, and those of
// the overload above.
Result<PagedKvView> paged_kv_view(const TranslationSnapshot& snapshot, uint32_t model_layer);

// A plain process-local pool in the [slot][token][head][lane] order (the
// order of both shipped slot-major groups inside one layer), e.g. for tests
// and the benchmark. k_bytes/v_bytes bound the buffers as above.
struct PlainPoolShape {
  uint32_t slot_count = 0;    // [blocks]
  uint32_t block_tokens = 0;  // P_a [tokens / block]
  uint32_t kv_heads = 0;      // H_kv [heads]
  uint32_t qk_dim = 0;        // d_qk [lanes]
  uint32_t v_dim = 0;         // d_v [lanes]
  ScalarType k_dtype = ScalarType::fp32;
  ScalarType v_dtype = ScalarType::fp32;

  uint64_t k_elements() const { return uint64_t{slot_count} * block_tokens * kv_heads * qk_dim; }
  uint64_t v_elements() const { return uint64_t{slot_count} * block_tokens * kv_heads * v_dim; }
};
Result<PagedKvView> plain_kv_view(const PlainPoolShape& shape, KvTensorBytes k, KvTensorBytes v);

// The mapper's contiguous virtual tensors (vAttention, 0x06C, 0x0BJ): tensor
// index 2*layer + kind inside the reservation, request slot b at b * R bytes,
// and inside a slot plain [token][head][lane] strides; no block table. The
// view's slots are request slots and block_tokens is T_max. The mapper's
// element width must match the dtype's. Errors: config_field ("dtype") for a
// width mismatch, coordinate_out_of_range ("layer"), executor_unsupported_dtype,
// invalid_argument for a null reservation.
Result<PagedKvView> contiguous_kv_view(const MapperGeometry& geometry, const std::byte* reservation_base,
                                       uint32_t layer, ScalarType dtype);

// One element widened exactly, for reference paths and tests; the caller keeps
// the coordinate inside the view's extents.
double load_element(const KvTensorView& tensor, uint64_t slot, uint64_t token, uint32_t head, uint32_t lane);

}  // namespace kvrt::executor
