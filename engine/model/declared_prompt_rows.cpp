// A templated prompt's rows under Prompt Cache's contract: see
// declared_prompt_rows.hpp.
#include "engine/model/declared_prompt_rows.hpp"

#include <algorithm>
#include <string>

namespace kvrt::model {

namespace {
Error segment_error(size_t i, const std::string& why) {
  return make_error(ErrorCode::invalid_argument, why, "segments[" + std::to_string(i) + "]");
}
}  // namespace

std::vector<uint32_t> declared_positions(std::span<const DeclaredSegmentRows> segments, uint32_t generated) {
  std::vector<uint32_t> out;
  for (const DeclaredSegmentRows& s : segments)
    for (uint32_t k = 0; k < s.rows; ++k) out.push_back(s.position_begin + k);
  for (uint32_t k = 0; k < generated; ++k) out.push_back(out.empty() ? k : out.back() + 1);
  return out;
}

Status check_declared_segments(std::span<const DeclaredSegmentRows> segments, uint32_t prompt_tokens) {
  if (segments.empty()) return make_error(ErrorCode::invalid_argument, "a prompt with no segments", "segments");
  uint32_t row = 0;
  uint64_t next_position = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const DeclaredSegmentRows& s = segments[i];
    if (s.rows == 0) return segment_error(i, "an empty segment");
    if (s.row_begin != row) return segment_error(i, "segments must be stored one after another from row 0");
    if (s.position_begin < next_position) return segment_error(i, "positions must increase across segments");
    row += s.rows;
    next_position = uint64_t{s.position_begin} + s.rows;
  }
  if (row != prompt_tokens)
    return make_error(
        ErrorCode::invalid_argument,
        "segments cover " + std::to_string(row) + " rows of a " + std::to_string(prompt_tokens) + "-token prompt",
        "segments");
  if (segments.back().module)
    return segment_error(segments.size() - 1, "the last segment must be free text: its logits start the answer");
  return Status::success();
}

Status compute_module_alone(const ReferenceModel& model, ModelKvCache& cache, const SequenceBlocks& module_blocks,
                            std::span<const TokenId> tokens, uint32_t position_begin) {
  std::vector<uint32_t> positions(tokens.size());
  for (uint32_t k = 0; k < positions.size(); ++k) positions[k] = position_begin + k;
  const ForwardChunk chunk{&module_blocks, tokens, 0, positions};
  auto logits = model.forward(cache, std::span(&chunk, 1));
  if (!logits.ok()) return logits.error();
  return Status::success();
}

Result<std::vector<float>> compute_free_text(const ReferenceModel& model, ModelKvCache& cache,
                                             const SequenceBlocks& blocks, std::span<const TokenId> tokens,
                                             std::span<const uint32_t> positions, uint32_t first_row) {
  const ForwardChunk chunk{&blocks, tokens, first_row, positions.first(tokens.size())};
  std::vector<std::vector<float>> logits;
  KVRT_TRY_ASSIGN(logits, model.forward(cache, std::span(&chunk, 1)));
  return std::move(logits.front());
}

Result<std::vector<TokenId>> generate_declared_prompt(const ReferenceModel& model, ModelKvCache& cache,
                                                      std::span<const TokenId> prompt,
                                                      std::span<const DeclaredSegmentRows> segments, uint32_t branch,
                                                      size_t total_tokens, SequenceBlocks* blocks_out) {
  KVRT_TRY(check_declared_segments(segments, static_cast<uint32_t>(prompt.size())));
  if (total_tokens <= prompt.size())
    return make_error(ErrorCode::invalid_argument, "a generation needs at least one token", "request");
  const CacheLayoutManifest& layout = cache.layout();
  const uint32_t P = layout.allocator_block_size;
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  const uint32_t sequence_blocks = static_cast<uint32_t>((total_tokens + P - 1) / P);
  uint32_t module_blocks = 0;
  for (const DeclaredSegmentRows& s : segments)
    if (s.module) module_blocks = std::max(module_blocks, (s.rows + P - 1) / P);
  if (uint64_t{sequence_blocks} + module_blocks > cache.slot_count())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "private cache holds " + std::to_string(cache.slot_count()) + " blocks, the prompt needs " +
                          std::to_string(sequence_blocks + module_blocks),
                      "slot");
  SequenceBlocks local, scratch;
  SequenceBlocks& blocks = blocks_out != nullptr ? *blocks_out : local;
  blocks.slots.assign(groups, std::vector<uint32_t>(sequence_blocks));
  scratch.slots.assign(groups, std::vector<uint32_t>(module_blocks));
  for (uint32_t g = 0; g < groups; ++g) {
    for (uint32_t j = 0; j < sequence_blocks; ++j) blocks.slots[g][j] = j;
    for (uint32_t j = 0; j < module_blocks; ++j) scratch.slots[g][j] = sequence_blocks + j;
  }
  std::vector<TokenId> out(prompt.begin(), prompt.end());
  std::vector<uint32_t> positions = declared_positions(segments, static_cast<uint32_t>(total_tokens - prompt.size()));
  std::vector<float> logits;
  for (const DeclaredSegmentRows& s : segments) {
    const std::span<const TokenId> tokens = std::span<const TokenId>(out).subspan(s.row_begin, s.rows);
    if (s.module) {
      KVRT_TRY(compute_module_alone(model, cache, scratch, tokens, s.position_begin));
      KVRT_TRY(copy_kv_rows(cache, scratch, cache, blocks, 0, s.rows, s.row_begin));
    } else {
      KVRT_TRY_ASSIGN(logits,
                      compute_free_text(model, cache, blocks, std::span<const TokenId>(out).first(s.row_begin + s.rows),
                                        positions, s.row_begin));
    }
  }
  out.push_back(ranked_tokens(logits, branch + 1).at(branch));
  while (out.size() < total_tokens) {
    const ForwardChunk step{&blocks, out, static_cast<uint32_t>(out.size() - 1),
                            std::span<const uint32_t>(positions).first(out.size())};
    std::vector<std::vector<float>> next;
    KVRT_TRY_ASSIGN(next, model.forward(cache, std::span(&step, 1)));
    out.push_back(greedy_token(next[0]));
  }
  return out;
}

}  // namespace kvrt::model
