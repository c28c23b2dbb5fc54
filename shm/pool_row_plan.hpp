#pragma once
// PoolRowPlan: where the canonical token rows of one pool's blocks lie
// (services/allocator/payload_store.hpp "Canonical row order"), as byte
// offsets of the pool's segment layout (pool_geometry.hpp). Pure arithmetic
// over a PoolGeometry, so every store that lays a pool out that way (POSIX
// shared memory, shm_payload_store.hpp; GPU memory, gpu/cuda_pool_store.hpp)
// moves the same bytes and differs only in how it copies them.
//
// A pool lays K and V out in the group's declared axis order (0x03E), where
// one token's row is generally not contiguous (layer-major g1 of
// two-group-tp2 puts each layer of a token in another slot-sized slab;
// slot-major g0 still interleaves the block's other tokens between layers).
// The plan holds, per tensor, the byte runs of one token row in canonical
// order, relative to the row's first element (l = h = x = 0):
//   - When the declared order keeps layer_local before kv_head before
//     head_dim (every shipped layout), walking the declared order over one
//     token visits the scalars in canonical order, so the plan is exactly the
//     pool's own row_runs() of one token, fused as the pool fuses them.
//   - Any other order is gathered per canonical (layer, head, lane) from
//     byte_offset(), fusing neighbours that happen to be adjacent.
// Element offsets are linear in the coordinates (0x03E), so the plan applies
// to every (slot, token) after adding that row's origin, which comes from
// byte_offset(). Block copies and zeroing need no canonical order and walk
// the pool's row_runs() of the whole row range directly.
#include <cstdint>
#include <vector>

#include "services/common/assert.hpp"
#include "shm/pool_geometry.hpp"

namespace kvrt::shm {

// `height` rows of `width` bytes each, one per token, in the pool's segment
// (a row every segment_pitch bytes) and in a canonical row buffer (a row
// every canonical_pitch bytes). width <= both pitches: two tokens' elements
// never overlap (PoolRowPlan::create checks it).
struct RowRect {
  uint64_t segment_offset = 0;
  uint64_t canonical_offset = 0;
  uint64_t width = 0;
  uint32_t height = 0;
  uint64_t segment_pitch = 0;
  uint64_t canonical_pitch = 0;
};

class PoolRowPlan {
 public:
  // Errors: those of PoolGeometry::byte_offset / row_runs for slot 0 (a
  // geometry without a slot or a token).
  static Result<PoolRowPlan> create(const PoolGeometry& geometry);

  const PoolGeometry& geometry() const { return geometry_; }
  uint64_t row_bytes() const { return k_.row_bytes + v_.row_bytes; }  // B_row,g [bytes / token]
  uint64_t k_row_bytes() const { return k_.row_bytes; }

  // Rows [first_row, first_row + rows) of block `slot`, whose canonical
  // bytes are rows * row_bytes() long, token-major, K then V within a row.
  // Each run of the row plan repeats once per row at a constant distance in
  // both places (element offsets are linear in the token coordinate, 0x03E),
  // so the rows move as one rectangle per run:
  //   f(RowRect{segment_offset, canonical_offset, width, height,
  //             segment_pitch, canonical_pitch})
  // row i of the rectangle being `width` bytes at segment_offset + i *
  // segment_pitch and at canonical_offset + i * canonical_pitch. A device
  // copies a rectangle in one 2-D transfer instead of one call per row.
  // Arguments must be inside the pool (callers check; KVRT_ASSERT here).
  template <class F>
  void for_each_row_rect(uint32_t slot, uint32_t first_row, uint32_t rows, F&& f) const {
    if (rows == 0) return;
    uint64_t canonical = 0;
    for (const TensorKind kind : {TensorKind::K, TensorKind::V}) {
      const TensorRows& tensor = kind == TensorKind::K ? k_ : v_;
      const uint64_t origin = row_origin(slot, first_row, kind);
      for (const Run& run : tensor.runs) {
        f(RowRect{origin + run.offset, canonical, run.bytes, rows, tensor.token_pitch, row_bytes()});
        canonical += run.bytes;
      }
    }
  }

  // Rows [0, rows) of block src_slot onto the same rows of dst_slot, K and V:
  // f(src_offset, dst_offset, bytes). Two blocks of one tensor share the
  // geometry, so their row ranges split into the same runs in the same order.
  template <class F>
  void for_each_copy_run(uint32_t src_slot, uint32_t dst_slot, uint32_t rows, F&& f) const {
    for (const TensorKind kind : {TensorKind::K, TensorKind::V}) {
      const RowRuns src = block_runs(src_slot, kind, rows), dst = block_runs(dst_slot, kind, rows);
      KVRT_ASSERT(src.run_count() == dst.run_count() && src.run_bytes() == dst.run_bytes(),
                  "two blocks of one pool split into different runs");
      // Element offsets are linear in the coordinates (0x03E): every run of
      // the destination sits one constant distance from its source run.
      const uint64_t src_origin = row_origin(src_slot, 0, kind), dst_origin = row_origin(dst_slot, 0, kind);
      src.for_each([&](ByteRun run) { f(run.offset, run.offset - src_origin + dst_origin, run.bytes); });
    }
  }

  // Every byte of block `slot`, K and V: f(segment_offset, bytes).
  template <class F>
  void for_each_block_run(uint32_t slot, F&& f) const {
    for (const TensorKind kind : {TensorKind::K, TensorKind::V})
      block_runs(slot, kind, geometry_.shape().block_tokens).for_each([&](ByteRun run) { f(run.offset, run.bytes); });
  }

 private:
  struct Run {
    uint64_t offset = 0;  // [bytes] from the row's first element (l = h = x = 0)
    uint64_t bytes = 0;
  };
  struct TensorRows {
    std::vector<Run> runs;     // canonical order; bytes sum to row_bytes
    uint64_t row_bytes = 0;    // L_g * H_kv,g * d_h * b [bytes]
    uint64_t token_pitch = 0;  // [bytes] from token t's row origin to token t + 1's
  };
  PoolRowPlan(const PoolGeometry& geometry, TensorRows k, TensorRows v)
      : geometry_(geometry), k_(std::move(k)), v_(std::move(v)) {}
  static Result<TensorRows> plan_tensor(const PoolGeometry& geometry, TensorKind kind);
  // Segment offset of element (l = 0, token `row`, h = 0, x = 0) of a block.
  uint64_t row_origin(uint32_t slot, uint32_t row, TensorKind kind) const;
  RowRuns block_runs(uint32_t slot, TensorKind kind, uint32_t rows) const;

  PoolGeometry geometry_;
  TensorRows k_, v_;
};

}  // namespace kvrt::shm
