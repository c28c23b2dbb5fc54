// The no-reuse replay of one served request: see engine_replay.hpp.
#include "engine/engine_replay.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/engine_worker.hpp"
#include "engine/model/kv_row_compare.hpp"

namespace kvrt {

Result<std::vector<TokenId>> generate_without_reuse(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                                    std::span<const TokenId> prompt, uint32_t branch,
                                                    size_t total_tokens, model::SequenceBlocks* blocks_out) {
  const CacheLayoutManifest& layout = cache.layout();
  const uint32_t P = layout.allocator_block_size;
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  if (prompt.empty() || total_tokens <= prompt.size())
    return make_error(ErrorCode::invalid_argument, "a generation needs a prompt and at least one token", "request");
  const uint32_t needed_blocks = static_cast<uint32_t>((total_tokens + P - 1) / P);
  if (needed_blocks > cache.slot_count())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "private cache holds " + std::to_string(cache.slot_count()) + " blocks, the request needs " +
                          std::to_string(needed_blocks),
                      "slot");
  // Private blocks 0..n-1 in every group: nothing shared, nothing reused.
  model::SequenceBlocks local;
  model::SequenceBlocks& blocks = blocks_out != nullptr ? *blocks_out : local;
  blocks.slots.assign(groups, std::vector<uint32_t>(needed_blocks));
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = 0; j < needed_blocks; ++j) blocks.slots[g][j] = j;
  std::vector<TokenId> out(prompt.begin(), prompt.end());
  model::ForwardChunk prefill{&blocks, out, 0};
  auto logits_result = model.forward(cache, std::span(&prefill, 1));
  if (!logits_result.ok()) return logits_result.error();
  std::vector<std::vector<float>> logits = std::move(logits_result).value();
  out.push_back(model::ranked_tokens(logits[0], branch + 1).at(branch));
  while (out.size() < total_tokens) {
    model::ForwardChunk step{&blocks, out, static_cast<uint32_t>(out.size() - 1)};
    KVRT_TRY_ASSIGN(logits, model.forward(cache, std::span(&step, 1)));
    out.push_back(model::greedy_token(logits[0]));
  }
  return out;
}

Result<std::vector<TokenId>> generate_reference(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                                std::span<const TokenId> prompt,
                                                std::span<const model::DeclaredSegmentRows> segments, uint32_t branch,
                                                size_t total_tokens, model::SequenceBlocks* blocks_out) {
  if (segments.empty()) return generate_without_reuse(model, cache, prompt, branch, total_tokens, blocks_out);
  return model::generate_declared_prompt(model, cache, prompt, segments, branch, total_tokens, blocks_out);
}

Result<ReplayVerdict> replay_without_reuse(const model::ReferenceModel& model, model::ModelKvCache& replay_cache,
                                           const model::ModelKvCache& shared, const ReplayedRequest& request) {
  const CacheLayoutManifest& layout = replay_cache.layout();
  const uint32_t P = layout.allocator_block_size;
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  if (request.blocks == nullptr || request.generated == 0 || request.prompt_tokens == 0 ||
      request.tokens.size() != uint64_t{request.prompt_tokens} + request.generated ||
      request.cached_rows > request.tokens.size() || request.reused_rows > request.cached_rows ||
      request.exact_rows > request.cached_rows || request.reused_segments.size() > request.segments.size())
    return make_error(ErrorCode::invalid_argument, "replayed request has inconsistent token counts", "request");
  model::SequenceBlocks blocks;
  std::vector<TokenId> replay;
  KVRT_TRY_ASSIGN(replay, generate_reference(model, replay_cache, request.tokens.first(request.prompt_tokens),
                                             request.segments, request.branch, request.tokens.size(), &blocks));
  // Which rows the served request reused: a prefix, or a templated
  // prompt's reused modules.
  std::vector<uint8_t> reused_row(request.cached_rows, 0);
  for (uint32_t t = 0; t < std::min(request.reused_rows, request.cached_rows); ++t) reused_row[t] = 1;
  for (size_t i = 0; i < request.reused_segments.size(); ++i)
    if (request.reused_segments[i] != 0)
      for (uint32_t t = request.segments[i].row_begin;
           t < request.segments[i].row_begin + request.segments[i].rows && t < request.cached_rows; ++t)
        reused_row[t] = 1;

  ReplayVerdict verdict;
  verdict.tokens_equal = std::equal(replay.begin(), replay.end(), request.tokens.begin());
  if (!verdict.tokens_equal) {
    size_t i = request.prompt_tokens;
    while (replay[i] == request.tokens[i]) ++i;
    verdict.first_mismatch = "generated token " + std::to_string(i - request.prompt_tokens) + " is " +
                             std::to_string(request.tokens[i]) + ", the no-reuse replay generates " +
                             std::to_string(replay[i]);
  }
  // Rows the replay wrote: prompt + generated - 1 (the last token has no row
  // yet), which covers every row the served request committed. A token row
  // spans every cache group; it matches only if all of its group rows do.
  std::vector<std::vector<uint8_t>> served(groups), again(groups);
  for (uint32_t g = 0; g < groups; ++g) {
    served[g].resize(layout.cache_groups[g].row_bytes());
    again[g].resize(served[g].size());
  }
  for (uint32_t t = 0; t < request.cached_rows; ++t) {
    const uint32_t j = t / P;
    bool equal = true;
    uint32_t differing_group = 0;
    for (uint32_t g = 0; g < groups; ++g) {
      if (j >= request.blocks->slots[g].size())
        return make_error(ErrorCode::table_out_of_bounds, "served request has no block " + std::to_string(j), "blocks");
      KVRT_TRY(shared.read_canonical_row(g, request.blocks->slots[g][j], t % P, served[g]));
      KVRT_TRY(replay_cache.read_canonical_row(g, blocks.slots[g][j], t % P, again[g]));
      if (t < request.exact_rows) {
        if (equal && std::memcmp(served[g].data(), again[g].data(), served[g].size()) != 0) {
          equal = false;
          differing_group = g;
        }
      } else {
        // A shared-prefix decode row: within the bound, not bitwise.
        auto d_result = model::canonical_row_difference(layout, g, served[g], again[g]);
        if (!d_result.ok()) return d_result.error();
        const double d = std::move(d_result).value();
        verdict.bounded_row_max_difference = std::max(verdict.bounded_row_max_difference, d);
        if (equal && !(d <= kSharedPrefixRowBound)) {
          equal = false;
          differing_group = g;
        }
      }
    }
    const bool reused = reused_row[t] != 0;
    verdict.bounded_rows_checked += t >= request.exact_rows;
    ++verdict.rows_checked;
    verdict.reused_rows_checked += reused;
    if (!equal) {
      ++verdict.row_mismatches;
      verdict.reused_row_mismatches += reused;
      if (verdict.first_mismatch.empty())
        verdict.first_mismatch =
            std::string(reused ? "reused" : "computed") + " row " + std::to_string(t) +
            (t < request.exact_rows ? " differs from the no-reuse replay"
                                    : " (shared-prefix decode) exceeds the bound against the replay") +
            " (first in group " + std::to_string(differing_group) + ")";
    }
  }
  return verdict;
}

void add_verdict(EngineResult& result, const ReplayVerdict& verdict, const std::string& request) {
  ++result.requests_verified;
  if (!verdict.tokens_equal) ++result.token_mismatches;
  result.rows_checked += verdict.rows_checked;
  result.reused_rows_checked += verdict.reused_rows_checked;
  result.row_mismatches += verdict.row_mismatches;
  result.reused_row_mismatches += verdict.reused_row_mismatches;
  result.bounded_rows_checked += verdict.bounded_rows_checked;
  result.bounded_row_max_difference = std::max(result.bounded_row_max_difference, verdict.bounded_row_max_difference);
  if (result.first_mismatch.empty() && !verdict.first_mismatch.empty())
    result.first_mismatch = request + ": " + verdict.first_mismatch;
}

}  // namespace kvrt
