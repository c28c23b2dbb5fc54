#include "engine/model/forward_plan.hpp"

#include <algorithm>
#include <string>

#include "services/common/units.hpp"

namespace kvrt::model {
namespace {

// Sequences are bounded so positions and row counts fit 32 bits with room.
constexpr uint64_t kMaxSequenceTokens = uint64_t{1} << 31;

std::string chunk_field(size_t c) { return "chunks[" + std::to_string(c) + "]"; }
std::string slot_field(size_t c, size_t g, uint64_t j) {
  return chunk_field(c) + ".blocks.slots[" + std::to_string(g) + "][" + std::to_string(j) + "]";
}

// Rows [begin, end) of one physical block touched by one chunk.
struct BlockRows {
  uint32_t slot = 0;
  uint32_t begin = 0, end = 0;  // [rows inside the block]
  uint32_t chunk = 0;
  uint64_t block = 0;  // logical block index in the chunk's table
};

Status check_chunk(const ForwardChunk& chunk, size_t c, const CacheLayoutManifest& layout, uint32_t vocab,
                   uint32_t slot_count) {
  const std::string field = chunk_field(c);
  if (chunk.blocks == nullptr) return make_error(ErrorCode::invalid_argument, "no block table", field + ".blocks");
  const uint64_t tokens = chunk.tokens.size();
  if (tokens > kMaxSequenceTokens)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(tokens) + " tokens exceed " + std::to_string(kMaxSequenceTokens),
                      field + ".tokens");
  if (chunk.first_row >= tokens)
    return make_error(ErrorCode::executor_frontier_mismatch,
                      "first_row " + std::to_string(chunk.first_row) + " leaves no row to compute in a sequence of " +
                          std::to_string(tokens) + " tokens",
                      field + ".first_row");
  // Declared positions (Prompt Cache, 0x0CB): one per stored row, increasing.
  if (!chunk.positions.empty()) {
    if (chunk.positions.size() != tokens)
      return make_error(
          ErrorCode::invalid_argument,
          std::to_string(chunk.positions.size()) + " position ids for " + std::to_string(tokens) + " tokens",
          field + ".positions");
    for (uint64_t i = 1; i < tokens; ++i)
      if (chunk.positions[i] <= chunk.positions[i - 1])
        return make_error(ErrorCode::invalid_argument, "position ids must increase",
                          field + ".positions[" + std::to_string(i) + "]");
  }
  for (uint64_t i = 0; i < tokens; ++i)
    if (chunk.tokens[i] < 0 || uint32_t(chunk.tokens[i]) >= vocab)
      return make_error(
          ErrorCode::invalid_argument,
          "token " + std::to_string(chunk.tokens[i]) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")",
          field + ".tokens[" + std::to_string(i) + "]");
  const auto& tables = chunk.blocks->slots;
  if (tables.size() != layout.cache_groups.size())
    return make_error(ErrorCode::unknown_group,
                      std::to_string(tables.size()) + " block tables for " +
                          std::to_string(layout.cache_groups.size()) + " cache groups",
                      field + ".blocks.slots");
  const uint64_t blocks = ceil_div(tokens, layout.allocator_block_size);
  for (size_t g = 0; g < tables.size(); ++g) {
    if (tables[g].size() < blocks)
      return make_error(ErrorCode::table_out_of_bounds,
                        std::to_string(tokens) + " tokens need " + std::to_string(blocks) + " blocks of " +
                            std::to_string(layout.allocator_block_size) + " rows; the table has " +
                            std::to_string(tables[g].size()),
                        field + ".blocks.slots[" + std::to_string(g) + "]");
    for (uint64_t j = 0; j < blocks; ++j)
      if (tables[g][j] >= slot_count)
        return make_error(
            ErrorCode::coordinate_out_of_range,
            "slot " + std::to_string(tables[g][j]) + " >= " + std::to_string(slot_count) + " slots of the cache",
            slot_field(c, g, j));
  }
  return Status::success();
}

// Rows of block j of a sequence that fall in [from, to) [rows inside the block].
BlockRows block_rows(const ForwardChunk& chunk, size_t g, uint32_t c, uint64_t j, uint64_t from, uint64_t to,
                     uint32_t p) {
  const uint64_t start = j * p;
  return BlockRows{chunk.blocks->slots[g][j], uint32_t(std::max(from, start) - start),
                   uint32_t(std::min(to, start + p) - start), c, j};
}

// No block rows written twice, none read while written (see the header).
Status check_aliasing(const CacheLayoutManifest& layout, std::span<const ForwardChunk> chunks) {
  const uint32_t p = layout.allocator_block_size;
  // By slot, then first row; chunk and block break ties so that the error
  // names the same (later) chunk on every standard library.
  const auto before = [](const BlockRows& a, const BlockRows& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.begin != b.begin) return a.begin < b.begin;
    return a.chunk != b.chunk ? a.chunk < b.chunk : a.block < b.block;
  };
  for (size_t g = 0; g < layout.cache_groups.size(); ++g) {
    std::vector<BlockRows> writes;
    for (uint32_t c = 0; c < chunks.size(); ++c) {
      const ForwardChunk& ch = chunks[c];
      const uint64_t t = ch.tokens.size();
      for (uint64_t j = ch.first_row / p; j * p < t; ++j) writes.push_back(block_rows(ch, g, c, j, ch.first_row, t, p));
    }
    std::sort(writes.begin(), writes.end(), before);
    for (size_t i = 1; i < writes.size(); ++i)
      if (writes[i].slot == writes[i - 1].slot && writes[i].begin < writes[i - 1].end)
        return make_error(ErrorCode::invalid_argument,
                          "rows of slot " + std::to_string(writes[i].slot) + " are written twice (also by " +
                              slot_field(writes[i - 1].chunk, g, writes[i - 1].block) + ")",
                          slot_field(writes[i].chunk, g, writes[i].block));
    for (uint32_t c = 0; c < chunks.size(); ++c) {
      const ForwardChunk& ch = chunks[c];
      for (uint64_t j = 0; j * p < ch.first_row; ++j) {
        const BlockRows read = block_rows(ch, g, c, j, 0, ch.first_row, p);
        auto w = std::lower_bound(writes.begin(), writes.end(), BlockRows{read.slot, 0, 0, 0, 0}, before);
        for (; w != writes.end() && w->slot == read.slot && w->begin < read.end; ++w)
          if (w->end > read.begin)
            return make_error(ErrorCode::invalid_argument,
                              "prefix rows of slot " + std::to_string(read.slot) + " are being written by " +
                                  slot_field(w->chunk, g, w->block) + " in the same call",
                              slot_field(c, g, j));
      }
    }
  }
  return Status::success();
}

}  // namespace

Result<ForwardPlan> plan_forward(const CacheLayoutManifest& layout, uint32_t vocab, uint32_t slot_count,
                                 std::span<const ForwardChunk> chunks) {
  for (size_t c = 0; c < chunks.size(); ++c) KVRT_TRY(check_chunk(chunks[c], c, layout, vocab, slot_count));
  KVRT_TRY(check_aliasing(layout, chunks));

  const uint32_t p = layout.allocator_block_size;
  const size_t groups = layout.cache_groups.size();
  ForwardPlan plan;
  plan.valid_rows.assign(groups, std::vector<std::vector<uint32_t>>(chunks.size()));
  plan.requests.assign(groups, std::vector<executor::PrefillRequest>(chunks.size()));
  for (uint32_t c = 0; c < chunks.size(); ++c) {
    const ForwardChunk& ch = chunks[c];
    const uint32_t t = static_cast<uint32_t>(ch.tokens.size());
    for (uint32_t pos = ch.first_row; pos < t; ++pos) plan.rows.push_back({c, pos});
    plan.last_row.push_back(plan.rows.size() - 1);
    const uint64_t blocks = ceil_div(t, p);
    for (size_t g = 0; g < groups; ++g) {
      std::vector<uint32_t>& valid = plan.valid_rows[g][c];
      for (uint64_t j = 0; j < blocks; ++j) valid.push_back(uint32_t(std::min<uint64_t>(p, t - j * p)));
      executor::PrefillRequest& req = plan.requests[g][c];
      req.table.slots = std::span<const uint32_t>(ch.blocks->slots[g].data(), blocks);
      req.table.valid_rows = valid;
      req.table.context_tokens = t;
      req.suffix_tokens = t - ch.first_row;
    }
  }
  return plan;
}

}  // namespace kvrt::model
