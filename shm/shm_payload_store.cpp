#include "shm/shm_payload_store.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "services/common/assert.hpp"

namespace kvrt::shm {
namespace {

std::string segment_field(uint32_t g, const char* field) { return "segments[" + std::to_string(g) + "]." + field; }

std::string config_field(uint32_t g, const char* field) { return "groups[" + std::to_string(g) + "]." + field; }

}  // namespace

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
    Result<PoolRowPlan> rows = PoolRowPlan::create(segment.geometry());
    if (!rows.ok()) return rows.error();
    groups.push_back(GroupPool{std::move(segment), std::move(*rows)});
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

uint32_t ShmPayloadStore::block_tokens() const { return groups_[0].segment.geometry().shape().block_tokens; }
uint32_t ShmPayloadStore::capacity_blocks() const { return groups_[0].segment.capacity_blocks(); }
uint64_t ShmPayloadStore::row_bytes(uint32_t g) const { return groups_.at(g).rows.row_bytes(); }
uint64_t ShmPayloadStore::k_row_bytes(uint32_t g) const { return groups_.at(g).rows.k_row_bytes(); }

PoolMemory ShmPayloadStore::memory(uint32_t g) const {
  // The mapping is this process's and writable; the store hands it out
  // through a const accessor because handing it out changes nothing here.
  auto* base = const_cast<uint8_t*>(segment_view(g));
  return PoolMemory{base, &groups_.at(g).rows, false};
}

PoolBlockRef ShmPayloadStore::block_ref(uint32_t g, uint32_t slot) const {
  const BlockPoolSegment& s = groups_.at(g).segment;
  return PoolBlockRef{s.pool_id(), s.pool_generation(), PhysicalSlot{slot}};
}

// The mapping covers the whole segment (header, K, V), so the K tensor's
// view less its offset is the segment's first byte.
const uint8_t* ShmPayloadStore::segment_view(uint32_t g) const {
  const BlockPoolSegment& s = groups_[g].segment;
  const uint64_t k = s.geometry().tensor_offset(TensorKind::K);
  auto view = s.bytes(ByteRun{k, s.geometry().tensor_bytes(TensorKind::K)});
  KVRT_ASSERT(view.ok(), "a pool's own tensor is outside its segment");
  return view->data() - k;
}

uint8_t* ShmPayloadStore::segment_base(uint32_t g) {
  BlockPoolSegment& s = groups_[g].segment;
  const uint64_t k = s.geometry().tensor_offset(TensorKind::K);
  auto span = s.bytes(ByteRun{k, s.geometry().tensor_bytes(TensorKind::K)});
  KVRT_ASSERT(span.ok(), "a pool's own tensor is outside its segment");
  return span->data() - k;
}

void ShmPayloadStore::write_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                                 std::span<const uint8_t> bytes) {
  assert_rows(g, slot, first_row, rows, "write_rows");
  KVRT_ASSERT(bytes.size() == rows * row_bytes(g), "write_rows: span is not rows * B_row bytes");
  uint8_t* base = segment_base(g);
  groups_[g].rows.for_each_row_rect(slot, first_row, rows, [&](const RowRect& rect) {
    for (uint32_t i = 0; i < rect.height; ++i)
      std::memcpy(base + rect.segment_offset + i * rect.segment_pitch,
                  bytes.data() + rect.canonical_offset + i * rect.canonical_pitch, rect.width);
  });
}

void ShmPayloadStore::read_rows(uint32_t g, uint32_t slot, uint32_t first_row, uint32_t rows,
                                std::span<uint8_t> out) const {
  assert_rows(g, slot, first_row, rows, "read_rows");
  KVRT_ASSERT(out.size() == rows * row_bytes(g), "read_rows: span is not rows * B_row bytes");
  const uint8_t* base = segment_view(g);
  groups_[g].rows.for_each_row_rect(slot, first_row, rows, [&](const RowRect& rect) {
    for (uint32_t i = 0; i < rect.height; ++i)
      std::memcpy(out.data() + rect.canonical_offset + i * rect.canonical_pitch,
                  base + rect.segment_offset + i * rect.segment_pitch, rect.width);
  });
}

void ShmPayloadStore::copy_rows(uint32_t g, uint32_t src_slot, uint32_t dst_slot, uint32_t rows) {
  assert_rows(g, src_slot, 0, rows, "copy_rows source");
  assert_rows(g, dst_slot, 0, rows, "copy_rows destination");
  KVRT_ASSERT(src_slot != dst_slot, "copy_rows: a block copied onto itself");
  uint8_t* base = segment_base(g);
  groups_[g].rows.for_each_copy_run(src_slot, dst_slot, rows, [&](uint64_t from, uint64_t to, uint64_t n) {
    std::memcpy(base + to, base + from, n);
  });
}

void ShmPayloadStore::zero_block(uint32_t g, uint32_t slot) {
  assert_rows(g, slot, 0, block_tokens(), "zero_block");
  uint8_t* base = segment_base(g);
  groups_[g].rows.for_each_block_run(slot, [&](uint64_t at, uint64_t n) { std::memset(base + at, 0, n); });
}

}  // namespace kvrt::shm
