#include "shm/pool_row_plan.hpp"

namespace kvrt::shm {
namespace {

size_t position_of(const PoolShape& s, TensorAxis axis) {
  for (size_t p = 0; p < kTensorAxisCount; ++p)
    if (s.axis_order[p] == axis) return p;
  KVRT_ASSERT(false, "axis missing from a planned pool's axis order");
  return 0;
}

// Walking the declared order over one token visits (layer, head, lane) in
// canonical order exactly when the declared order keeps them in that
// relative order; where the other two axes (slot, token) sit does not matter,
// since both are fixed for one row.
bool declared_order_is_canonical_within_row(const PoolShape& s) {
  return position_of(s, TensorAxis::layer_local) < position_of(s, TensorAxis::kv_head) &&
         position_of(s, TensorAxis::kv_head) < position_of(s, TensorAxis::head_dim);
}

}  // namespace

Result<PoolRowPlan::TensorRows> PoolRowPlan::plan_tensor(const PoolGeometry& geo, TensorKind kind) {
  const PoolShape& s = geo.shape();
  uint64_t origin = 0;
  KVRT_TRY_ASSIGN(origin, geo.byte_offset(PhysicalSlot{0}, KvCoordinate{kind, 0, 0, 0, 0}));

  TensorRows rows;
  rows.row_bytes = uint64_t{s.layers} * s.kv_heads * s.head_dim * geo.scalar_bytes(kind);
  const auto append = [&](uint64_t offset, uint64_t bytes) {
    const uint64_t relative = offset - origin;  // origin is the row's lowest element
    if (!rows.runs.empty() && rows.runs.back().offset + rows.runs.back().bytes == relative)
      rows.runs.back().bytes += bytes;
    else
      rows.runs.push_back(Run{relative, bytes});
  };
  if (declared_order_is_canonical_within_row(s)) {
    // The pool's own runs of token 0 of slot 0, in increasing offset order.
    RowRuns runs;
    KVRT_TRY_ASSIGN(runs, geo.row_runs(PhysicalSlot{0}, kind, 0, 1));
    runs.for_each([&](ByteRun run) { append(run.offset, run.bytes); });
  } else {
    const uint32_t scalar = geo.scalar_bytes(kind);
    for (uint32_t l = 0; l < s.layers; ++l)
      for (uint32_t h = 0; h < s.kv_heads; ++h)
        for (uint32_t x = 0; x < s.head_dim; ++x) {
          uint64_t offset = 0;
          KVRT_TRY_ASSIGN(offset, geo.byte_offset(PhysicalSlot{0}, KvCoordinate{kind, l, 0, h, x}));
          append(offset, scalar);
        }
  }
  uint64_t planned = 0;
  for (const Run& run : rows.runs) planned += run.bytes;
  KVRT_ASSERT(planned == rows.row_bytes, "row plan does not cover one token row of the tensor");

  // The token stride, from the token coordinate's coefficient (offsets are
  // linear in it, 0x03E). A one-token block never moves two rows at once.
  if (s.block_tokens > 1) {
    uint64_t next = 0;
    KVRT_TRY_ASSIGN(next, geo.byte_offset(PhysicalSlot{0}, KvCoordinate{kind, 0, 1, 0, 0}));
    KVRT_ASSERT(next > origin, "a later token of a block lies before an earlier one");
    rows.token_pitch = next - origin;
    // Every run of token t + 1 is the same run of token t moved by the
    // pitch; the two are disjoint elements, so no run is wider than it.
    for (const Run& run : rows.runs)
      KVRT_ASSERT(run.bytes <= rows.token_pitch, "a row run overlaps the next token's row");
  } else {
    rows.token_pitch = rows.row_bytes;
  }
  return rows;
}

Result<PoolRowPlan> PoolRowPlan::create(const PoolGeometry& geometry) {
  TensorRows k, v;
  KVRT_TRY_ASSIGN(k, plan_tensor(geometry, TensorKind::K));
  KVRT_TRY_ASSIGN(v, plan_tensor(geometry, TensorKind::V));
  return PoolRowPlan(geometry, std::move(k), std::move(v));
}

uint64_t PoolRowPlan::row_origin(uint32_t slot, uint32_t row, TensorKind kind) const {
  auto offset = geometry_.byte_offset(PhysicalSlot{slot}, KvCoordinate{kind, 0, row, 0, 0});
  KVRT_ASSERT(offset.ok(), offset.error().describe());  // message built only on failure
  return *offset;
}

RowRuns PoolRowPlan::block_runs(uint32_t slot, TensorKind kind, uint32_t rows) const {
  auto runs = geometry_.row_runs(PhysicalSlot{slot}, kind, 0, rows);
  KVRT_ASSERT(runs.ok(), runs.error().describe());
  return *runs;
}

}  // namespace kvrt::shm
