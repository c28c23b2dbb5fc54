#pragma once
// Byte layout of one cache group's block pool inside its shared-memory segment.
//
//   [0, 4096)                    immutable header (pool_segment_header.hpp)
//   [k_offset, k_offset+k_bytes) K tensor, shape and strides from the manifest
//   [v_offset, v_offset+v_bytes) V tensor, same shape, V dtype
//
// Each tensor has the five axes of spec 0x03E in the group's declared order,
// with physical_slot = pool capacity [blocks] and token_offset = P_a [tokens]
// (the allocator's block size). Strides and element offsets come from
// services/address/tensor_geometry.hpp, the one implementation of 0x03E, so
// the pool and the reference translator cannot disagree on an address.
// Tensors start on 4096-byte boundaries so that either can later be registered
// or remapped page by page (cudaHostRegister, memfd runs) without a partial page.
//
// Pure arithmetic: no OS calls, so the same checks run in owner and attacher.
#include <array>
#include <cstdint>

#include "services/address/tensor_geometry.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::shm {

inline constexpr uint64_t kHeaderBytes = 4096;      // [bytes] header region at offset 0
inline constexpr uint64_t kTensorAlignment = 4096;  // [bytes] alignment of K and V bases

// Configured pool size, in bytes or in blocks.
struct PoolCapacity {
  enum class Unit : uint8_t { blocks, bytes };
  Unit unit = Unit::blocks;
  uint64_t amount = 0;  // [blocks] or [bytes], per unit
  static PoolCapacity blocks(uint64_t n) { return {Unit::blocks, n}; }
  static PoolCapacity bytes(uint64_t n) { return {Unit::bytes, n}; }
};

// Blocks per group pool. A byte budget buys whole bundles: every logical block
// needs one physical block in every cache group at once (a half bundle is never
// published), so blocks = floor(bytes / bundle bytes) with
// bundle bytes = P_a * sum_g B_row,g (0x02A, 0x03B; 1 MiB for two-group-tp2).
// Every group's pool gets the same count. Errors: config_field ("capacity")
// when the result is zero or does not fit a 32-bit slot index.
Result<uint32_t> capacity_in_blocks(const CacheLayoutManifest& manifest, PoolCapacity capacity);

// What a pool's header records about its shape; enough to rebuild the geometry
// in a process that holds no manifest (the layout digest pins the rest).
struct PoolShape {
  uint32_t layers = 0;    // L_g [layers]
  uint32_t kv_heads = 0;  // H_kv,g local [heads]
  uint32_t head_dim = 0;  // d_h [lanes]
  ScalarType k_dtype = ScalarType::fp16;
  ScalarType v_dtype = ScalarType::fp16;
  std::array<TensorAxis, kTensorAxisCount> axis_order{};  // outermost first
  uint32_t block_tokens = 0;                              // P_a [tokens / block]
  uint32_t capacity_blocks = 0;                           // physical_slot extent [blocks]
  friend bool operator==(const PoolShape&, const PoolShape&) = default;
};
// Errors: invalid_manifest / unknown_group from the manifest.
Result<PoolShape> pool_shape(const CacheLayoutManifest& manifest, CacheGroupId group, uint32_t capacity_blocks);

// One element of a pool, in group-local coordinates (layer_local = model layer
// - layer_start; the address translator of 0x03I resolves the group first).
struct KvCoordinate {
  TensorKind kind = TensorKind::K;
  uint32_t layer_local = 0;   // [layers]
  uint32_t token_offset = 0;  // row inside the block [tokens]
  uint32_t kv_head = 0;       // [heads]
  uint32_t lane = 0;          // head_dim index [scalars]
};

// A contiguous byte range of the segment.
struct ByteRun {
  uint64_t offset = 0;  // [bytes] from the segment start
  uint64_t bytes = 0;
  friend bool operator==(const ByteRun&, const ByteRun&) = default;
};

// The rows [token_begin, token_end) of one block in one tensor, as maximal
// contiguous runs. Axes inside the innermost partially covered axis are fully
// covered and fuse into each run; the axes outside it are walked like an
// odometer. Slot-major g0 rows [0,16) are one run per block; layer-major g1
// rows are one run per layer (0x03B's two orders).
class RowRuns {
 public:
  uint64_t run_count() const;
  uint64_t run_bytes() const { return run_bytes_; }
  uint64_t total_bytes() const { return run_count() * run_bytes_; }
  // Calls f(ByteRun) in increasing offset order.
  template <class F>
  void for_each(F&& f) const {
    if (run_bytes_ == 0) return;
    std::array<uint64_t, kTensorAxisCount> index{};
    while (true) {
      uint64_t offset = first_offset_;
      for (uint32_t a = 0; a < outer_axes_; ++a) offset += index[a] * outer_stride_bytes_[a];
      f(ByteRun{offset, run_bytes_});
      uint32_t a = outer_axes_;
      while (a > 0 && ++index[a - 1] == outer_extent_[a - 1]) index[--a] = 0;
      if (a == 0) return;
    }
  }

 private:
  friend class PoolGeometry;
  uint64_t first_offset_ = 0;  // [bytes] segment offset of the first run
  uint64_t run_bytes_ = 0;     // 0 for an empty row range
  uint32_t outer_axes_ = 0;    // walked axes with extent > 1, outermost first
  std::array<uint64_t, kTensorAxisCount> outer_extent_{};
  std::array<uint64_t, kTensorAxisCount> outer_stride_bytes_{};
};

class PoolGeometry {
 public:
  // Errors: invalid_argument for zero extents, a non-permutation axis order or
  // an unknown dtype (field names it); storage_exhausted when the tensors
  // overflow 64-bit byte arithmetic.
  static Result<PoolGeometry> plan(const PoolShape& shape);

  const PoolShape& shape() const { return shape_; }
  const TensorGeometry& tensor() const { return tensor_; }  // shared by K and V
  uint32_t scalar_bytes(TensorKind kind) const;
  uint64_t tensor_offset(TensorKind kind) const { return kind == TensorKind::K ? k_offset_ : v_offset_; }
  uint64_t tensor_bytes(TensorKind kind) const { return kind == TensorKind::K ? k_bytes_ : v_bytes_; }
  uint64_t segment_bytes() const { return segment_bytes_; }
  // K plus V bytes of one block, all layers [bytes] = P_a * B_row,g (0x02A).
  uint64_t block_bytes() const;

  // Segment byte offset of one element: base(kind) + scalar_bytes * E (0x03E).
  // Errors: coordinate_out_of_range naming the first offending field
  // (block_id, layer_local, token_offset, kv_head, lane).
  Result<uint64_t> byte_offset(PhysicalSlot block, const KvCoordinate& c) const;
  // lane_count lanes of one head starting at c.lane. Contiguous only when
  // head_dim is the innermost axis; otherwise more than one lane is rejected
  // (invalid_argument, "lane_count").
  Result<ByteRun> lane_run(PhysicalSlot block, const KvCoordinate& c, uint32_t lane_count) const;
  // Errors: coordinate_out_of_range for block_id, or token_begin > token_end
  // or token_end > P_a ("token_range"). An empty range yields no runs.
  Result<RowRuns> row_runs(PhysicalSlot block, TensorKind kind, uint32_t token_begin, uint32_t token_end) const;

 private:
  PoolShape shape_;
  TensorGeometry tensor_;
  uint64_t k_offset_ = 0, k_bytes_ = 0, v_offset_ = 0, v_bytes_ = 0, segment_bytes_ = 0;
};

}  // namespace kvrt::shm
