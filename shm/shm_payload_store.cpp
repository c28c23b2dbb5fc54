#include "shm/shm_payload_store.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "services/common/assert.hpp"

namespace kvrt::shm {
namespace {

std::string segment_field(uint32_t g, const char* field) {
  return "segments[" + std::to_string(g) + "]." + field;
}

std::string config_field(uint32_t g, const char* field) {
  return "groups[" + std::to_string(g) + "]." + field;
}

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

constexpr TensorKind kKinds[] = {TensorKind::K, TensorKind::V};

}  // namespace

Result<ShmPayloadStore::TensorRows> ShmPayloadStore::plan_rows(const BlockPoolSegment& segment, TensorKind kind) {
  const PoolGeometry& geo = segment.geometry();
  const PoolShape& s = geo.shape();
  const PoolBlockRef ref{segment.pool_id(), segment.pool_generation(), PhysicalSlot{0}};
  uint64_t origin = 0;
  KVRT_TRY_ASSIGN(origin, segment.byte_offset(ref, KvCoordinate{kind, 0, 0, 0, 0}));

  TensorRows rows;
  rows.row_bytes = uint64_t{s.layers} * s.kv_heads * s.head_dim * geo.scalar_bytes(kind);
  const auto append = [&](uint64_t offset, uint64_t bytes) {
    const uint64_t relative = offset - origin;  // origin is the row's lowest element
    if (!rows.plan.empty() && rows.plan.back().offset + rows.plan.back().bytes == relative)
      rows.plan.back().bytes += bytes;
    else
      rows.plan.push_back(PlanRun{relative, bytes});
  };
  if (declared_order_is_canonical_within_row(s)) {
    // The pool's own runs of token 0 of slot 0, in increasing offset order.
    RowRuns runs;
    KVRT_TRY_ASSIGN(runs, segment.row_runs(ref, kind, 0, 1));
    runs.for_each([&](ByteRun run) { append(run.offset, run.bytes); });
  } else {
    const uint32_t scalar = geo.scalar_bytes(kind);
    for (uint32_t l = 0; l < s.layers; ++l)
      for (uint32_t h = 0; h < s.kv_heads; ++h)
        for (uint32_t x = 0; x < s.head_dim; ++x) {
          uint64_t offset = 0;
          KVRT_TRY_ASSIGN(offset, segment.byte_offset(ref, KvCoordinate{kind, l, 0, h, x}));
          append(offset, scalar);
        }
  }
  uint64_t planned = 0;
  for (const PlanRun& run : rows.plan) planned += run.bytes;
  KVRT_ASSERT(planned == rows.row_bytes, "row plan does not cover one token row of the tensor");
  return rows;
}

Result<ShmPayloadStore> ShmPayloadStore::create(std::vector<BlockPoolSegment> segments) {
  if (segments.empty())
    return make_error(ErrorCode::invalid_argument, "a payload store needs one pool segment per cache group",
                      "segments");
  const PoolShape& first = segments[0].geometry().shape();
  for (uint32_t g = 0; g < segments.size(); ++g) {
    const PoolShape& s = segments[g].geometry().shape();
    if (s.block_tokens != first.block_tokens)
      return make_error(ErrorCode::incompatible,
                        "pool " + segments[g].name() + " has blocks of " + std::to_string(s.block_tokens) +
                            " tokens, the first pool " + std::to_string(first.block_tokens),
                        segment_field(g, "block_tokens"));
    // A bundle takes one block of every group (0x04E): equal pool sizes.
    if (s.capacity_blocks != first.capacity_blocks)
      return make_error(ErrorCode::incompatible,
                        "pool " + segments[g].name() + " has " + std::to_string(s.capacity_blocks) +
                            " blocks, the first pool " + std::to_string(first.capacity_blocks),
                        segment_field(g, "capacity_blocks"));
    for (uint32_t j = 0; j < g; ++j)
      if (segments[j].group() == segments[g].group())
        return make_error(ErrorCode::invalid_argument,
                          "cache group " + std::to_string(segments[g].group().value) + " has two pools",
                          segment_field(g, "group"));
  }
  std::vector<GroupPool> groups;
  groups.reserve(segments.size());
  for (BlockPoolSegment& segment : segments) {
    TensorRows k, v;
    KVRT_TRY_ASSIGN(k, plan_rows(segment, TensorKind::K));
    KVRT_TRY_ASSIGN(v, plan_rows(segment, TensorKind::V));
    groups.push_back(GroupPool{std::move(segment), std::move(k), std::move(v)});
  }
  return ShmPayloadStore(std::move(groups));
}

Status ShmPayloadStore::check_config(const BlockAllocatorConfig& config) const {
  if (config.groups.size() != groups_.size())
    return make_error(ErrorCode::config_field,
                      std::to_string(config.groups.size()) + " group pools configured, the store holds " +
                          std::to_string(groups_.size()),
                      "groups");
  if (config.block_size != block_tokens())
    return make_error(ErrorCode::config_field,
                      "block_size " + std::to_string(config.block_size) + " differs from the pools' P_a " +
                          std::to_string(block_tokens()),
                      "block_size");
  for (uint32_t g = 0; g < groups_.size(); ++g) {
    const GroupPoolConfig& c = config.groups[g];
    const BlockPoolSegment& s = groups_[g].segment;
    const auto differs = [&](const char* field, uint64_t configured, uint64_t pooled) {
      return make_error(ErrorCode::config_field,
                        std::string(field) + " " + std::to_string(configured) + " differs from pool " + s.name() +
                            " (" + std::to_string(pooled) + ")",
                        config_field(g, field));
    };
    if (c.group != s.group()) return differs("group", c.group.value, s.group().value);
    if (c.pool != s.pool_id()) return differs("pool", c.pool.value, s.pool_id().value);
    if (c.pool_generation != s.pool_generation())
      return differs("pool_generation", c.pool_generation.value, s.pool_generation().value);
    if (c.capacity_blocks != capacity_blocks()) return differs("capacity_blocks", c.capacity_blocks, capacity_blocks());
    if (c.row_bytes != row_bytes(g)) return differs("row_bytes", c.row_bytes, row_bytes(g));
  }
  return Status::success();
}

Status ShmPayloadStore::check_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows) const {
  if (g >= groups_.size())
    return make_error(ErrorCode::unknown_group,
                      "group index " + std::to_string(g) + " is outside the store's " +
                          std::to_string(groups_.size()) + " pools",
                      "group_index");
  if (slot >= capacity_blocks())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "slot " + std::to_string(slot) + " is outside [0, " + std::to_string(capacity_blocks()) + ")",
                      "slot");
  if (uint64_t{first_row} + rows > block_tokens())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "rows [" + std::to_string(first_row) + ", " + std::to_string(uint64_t{first_row} + rows) +
                          ") are not inside a block of " + std::to_string(block_tokens()) + " rows",
                      "row_range");
  return Status::success();
}

uint32_t ShmPayloadStore::block_tokens() const { return groups_[0].segment.geometry().shape().block_tokens; }
uint32_t ShmPayloadStore::capacity_blocks() const { return groups_[0].segment.capacity_blocks(); }
uint64_t ShmPayloadStore::row_bytes(uint32_t g) const { return groups_.at(g).k.row_bytes + groups_.at(g).v.row_bytes; }
uint64_t ShmPayloadStore::k_row_bytes(uint32_t g) const { return groups_.at(g).k.row_bytes; }

PoolBlockRef ShmPayloadStore::block_ref(uint32_t g, uint32_t slot) const {
  const BlockPoolSegment& s = groups_.at(g).segment;
  return PoolBlockRef{s.pool_id(), s.pool_generation(), PhysicalSlot{slot}};
}

uint64_t ShmPayloadStore::row_origin(uint32_t g, uint32_t slot, uint32_t row, TensorKind kind) const {
  auto offset = groups_[g].segment.byte_offset(block_ref(g, slot), KvCoordinate{kind, 0, row, 0, 0});
  KVRT_ASSERT(offset.ok(), offset.error().describe());  // message built only on failure
  return *offset;
}

std::span<const uint8_t> ShmPayloadStore::tensor_view(uint32_t g, TensorKind kind) const {
  const BlockPoolSegment& s = groups_[g].segment;
  auto view = s.bytes(ByteRun{s.geometry().tensor_offset(kind), s.geometry().tensor_bytes(kind)});
  KVRT_ASSERT(view.ok(), "a pool's own tensor is outside its segment");
  return *view;
}

std::span<uint8_t> ShmPayloadStore::tensor_span(uint32_t g, TensorKind kind) {
  BlockPoolSegment& s = groups_[g].segment;
  auto span = s.bytes(ByteRun{s.geometry().tensor_offset(kind), s.geometry().tensor_bytes(kind)});
  KVRT_ASSERT(span.ok(), "a pool's own tensor is outside its segment");
  return *span;
}

void ShmPayloadStore::assert_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                                  const char* what) const {
  const Status status = check_rows(g, slot, first_row, rows);
  KVRT_ASSERT(status.ok(), std::string(what) + ": " + status.error().describe());
}

void ShmPayloadStore::write_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                                 std::span<const uint8_t> bytes) {
  assert_rows(g, slot, first_row, rows, "write_rows");
  KVRT_ASSERT(bytes.size() == rows * row_bytes(g), "write_rows: span is not rows * B_row bytes");
  const std::span<uint8_t> tensors[] = {tensor_span(g, TensorKind::K), tensor_span(g, TensorKind::V)};
  const uint8_t* from = bytes.data();
  for (uint32_t i = 0; i < rows; ++i)  // token-major: row i is K then V
    for (TensorKind kind : kKinds) {
      const TensorRows& plan = kind == TensorKind::K ? groups_[g].k : groups_[g].v;
      const uint64_t origin = row_origin(g, slot, first_row + i, kind);  // [bytes] in the segment
      uint8_t* row =
          tensors[static_cast<size_t>(kind)].data() + (origin - groups_[g].segment.geometry().tensor_offset(kind));
      for (const PlanRun& run : plan.plan) {
        std::memcpy(row + run.offset, from, run.bytes);
        from += run.bytes;
      }
    }
}

void ShmPayloadStore::read_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                                std::span<uint8_t> out) const {
  assert_rows(g, slot, first_row, rows, "read_rows");
  KVRT_ASSERT(out.size() == rows * row_bytes(g), "read_rows: span is not rows * B_row bytes");
  const std::span<const uint8_t> tensors[] = {tensor_view(g, TensorKind::K), tensor_view(g, TensorKind::V)};
  uint8_t* to = out.data();
  for (uint32_t i = 0; i < rows; ++i)
    for (TensorKind kind : kKinds) {
      const TensorRows& plan = kind == TensorKind::K ? groups_[g].k : groups_[g].v;
      const uint64_t origin = row_origin(g, slot, first_row + i, kind);  // [bytes] in the segment
      const uint8_t* row =
          tensors[static_cast<size_t>(kind)].data() + (origin - groups_[g].segment.geometry().tensor_offset(kind));
      for (const PlanRun& run : plan.plan) {
        std::memcpy(to, row + run.offset, run.bytes);
        to += run.bytes;
      }
    }
}

void ShmPayloadStore::copy_rows(uint32_t g, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) {
  assert_rows(g, src_slot, 0, rows, "copy_rows source");
  assert_rows(g, dst_slot, 0, rows, "copy_rows destination");
  KVRT_ASSERT(src_slot != dst_slot, "copy_rows: a block copied onto itself");
  BlockPoolSegment& segment = groups_[g].segment;
  for (TensorKind kind : kKinds) {
    // Two blocks of one tensor share the geometry, so their row ranges split
    // into the same runs in the same order: pair them one to one.
    auto src = segment.row_runs(block_ref(g, src_slot), kind, 0, rows);
    auto dst = segment.row_runs(block_ref(g, dst_slot), kind, 0, rows);
    KVRT_ASSERT(src.ok() && dst.ok(), "copy_rows: checked rows have no runs");
    KVRT_ASSERT(src->run_count() == dst->run_count() && src->run_bytes() == dst->run_bytes(),
                "copy_rows: two blocks of one pool split into different runs");
    scratch_runs_.clear();
    dst->for_each([&](ByteRun run) { scratch_runs_.push_back(run); });
    size_t next = 0;
    src->for_each([&](ByteRun run) {
      auto from = std::as_const(segment).bytes(run);
      auto to = segment.bytes(scratch_runs_[next++]);
      KVRT_ASSERT(from.ok() && to.ok(), "copy_rows: a run is outside its tensor");
      std::memcpy(to->data(), from->data(), run.bytes);
    });
  }
}

void ShmPayloadStore::zero_block(uint32_t g, uint32_t slot) {
  assert_rows(g, slot, 0, block_tokens(), "zero_block");
  BlockPoolSegment& segment = groups_[g].segment;
  for (TensorKind kind : kKinds) {
    auto runs = segment.row_runs(block_ref(g, slot), kind, 0, block_tokens());
    KVRT_ASSERT(runs.ok(), "zero_block: checked block has no runs");
    runs->for_each([&](ByteRun run) {
      auto bytes = segment.bytes(run);
      KVRT_ASSERT(bytes.ok(), "zero_block: a run is outside its tensor");
      std::memset(bytes->data(), 0, bytes->size());
    });
  }
}

}  // namespace kvrt::shm
