#pragma once
// The rows of a prompt assembled from declared modules (Prompt Cache,
// spec 0x0CB), computed by the reference model.
//
// The contract that makes a module reusable in any prompt of its schema:
// a module's rows are computed ALONE at its declared positions (its tokens
// attend only to earlier tokens of the same module, rotated by RoPE at the
// schema's position ids), so they depend on the module's tokens, positions,
// schema and model, never on what surrounds it. Free text (the gaps, the
// question) and the generated tokens attend to every earlier row of the
// assembled prompt. The prompt is stored segment after segment in declared
// position order, so its storage rows are contiguous while its position ids
// jump over the schema's gaps.
//
// Recomputing the whole assembled prompt under this contract, with nothing
// reused, is generate_declared_prompt(); a served prompt whose reused
// modules are bitwise equal to it reused them at the right positions, with
// the right tokens, schema and model.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model_kv_cache.hpp"
#include "engine/model/reference_model.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt::model {

// One segment of an assembled prompt, in storage order.
struct DeclaredSegmentRows {
  uint32_t row_begin = 0;       // its first storage row [rows]
  uint32_t rows = 0;            // [rows]
  uint32_t position_begin = 0;  // the declared position of its first row [positions]
  bool module = false;          // computed alone; free text attends to every earlier row
  friend bool operator==(const DeclaredSegmentRows&, const DeclaredSegmentRows&) = default;
};

// The position ids of an assembled prompt's rows, then `generated` more:
// each generated token at the position after the previous one.
std::vector<uint32_t> declared_positions(std::span<const DeclaredSegmentRows> segments, uint32_t generated = 0);

// Checks a layout of `prompt_tokens` rows: segments contiguous from row 0,
// non-empty, positions increasing across segments, the last one free text
// (its last row's logits choose the first generated token). Errors:
// invalid_argument naming "segments[i]".
Status check_declared_segments(std::span<const DeclaredSegmentRows> segments, uint32_t prompt_tokens);

// Computes a module alone: rows [0, tokens.size()) of `module_blocks` at
// positions [position_begin, position_begin + n). The model's errors.
Status compute_module_alone(const ReferenceModel& model, ModelKvCache& cache, const SequenceBlocks& module_blocks,
                            std::span<const TokenId> tokens, uint32_t position_begin);

// Computes free-text rows [first_row, tokens.size()) of a sequence whose
// rows [0, first_row) are in place, at `positions` (one per token), and
// returns the last row's logits. The model's errors.
Result<std::vector<float>> compute_free_text(const ReferenceModel& model, ModelKvCache& cache,
                                             const SequenceBlocks& blocks, std::span<const TokenId> tokens,
                                             std::span<const uint32_t> positions, uint32_t first_row);

// The whole prompt computed under the contract with nothing reused, at
// private blocks of `cache` (the sequence at blocks 0..n-1, each module
// alone at the blocks after them, then copied into place), the first token
// of rank `branch`, then greedy decoding up to `total_tokens`. Errors:
// check_declared_segments', the model's, coordinate_out_of_range ("slot")
// when the cache is too small.
Result<std::vector<TokenId>> generate_declared_prompt(const ReferenceModel& model, ModelKvCache& cache,
                                                      std::span<const TokenId> prompt,
                                                      std::span<const DeclaredSegmentRows> segments, uint32_t branch,
                                                      size_t total_tokens, SequenceBlocks* blocks_out = nullptr);

}  // namespace kvrt::model
