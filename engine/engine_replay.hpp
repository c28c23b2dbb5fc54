#pragma once
// The exactness check of `kvrt run`: one finished request replayed
// with no reuse and no sharing, in a private cache, and compared with what
// the served request produced. CAF-free.
//
// The replay prefills the whole prompt from row 0 (nothing reused, nothing
// forked), takes the same first token (a fork branch b takes the b-th best,
// as the served branch did), then decodes greedily as many tokens as were
// generated. Verdict: the generated tokens are identical, and every cached
// row of the served request (its rows [0, cached_rows) read from the shared
// pools at its blocks) is bitwise equal to the replay's row, reused rows
// counted separately. Because the reference model is batch-invariant
// (engine/model/reference_model.hpp), any difference is a reuse defect:
// wrong identity, wrong position, or wrong bytes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model/declared_prompt_rows.hpp"
#include "engine/model/model_kv_cache.hpp"
#include "engine/model/reference_model.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct EngineResult;

struct ReplayedRequest {
  const model::SequenceBlocks* blocks = nullptr;  // the served request's blocks in the shared pools
  std::span<const TokenId> tokens;                // prompt then generated [tokens]
  uint32_t prompt_tokens = 0;
  uint32_t generated = 0;    // [tokens], >= 1
  uint32_t branch = 0;       // the first token's rank
  uint32_t reused_rows = 0;  // rows [0, reused_rows) came from the index [rows]
  uint32_t cached_rows = 0;  // rows the served request committed [rows]
  // Rows [exact_rows, cached_rows) were decoded with shared-prefix execution:
  // compared within kSharedPrefixRowBound instead of bitwise.
  uint32_t exact_rows = 0;
  // A templated prompt (Prompt Cache, 0x0CB): its segments, replayed under
  // the same contract (model::generate_declared_prompt), and which of them
  // were reused modules (their rows counted as reused instead of
  // [0, reused_rows)). Empty: a plain prompt.
  std::span<const model::DeclaredSegmentRows> segments{};
  std::span<const uint8_t> reused_segments{};
};

// The bound a shared-prefix decode row keeps against the monolithic row, in
// model::canonical_row_difference: two fp16 ulps at 1.0 (2^-9). The merge's
// few-fp32-ulp difference can move a stored fp16 value by one ulp, and a
// later row that attends over such rows by about one more; services/model's
// shared-prefix tests measure at most 0.97 x 2^-10 and `kvrt run` about
// 0.9 x 2^-10. A wrong split or a wrong block read differs by orders of
// magnitude more.
inline constexpr double kSharedPrefixRowBound = 1.0 / 512.0;

struct ReplayVerdict {
  bool tokens_equal = false;
  uint64_t rows_checked = 0;
  uint64_t reused_rows_checked = 0;
  uint64_t row_mismatches = 0;
  uint64_t reused_row_mismatches = 0;
  uint64_t bounded_rows_checked = 0;  // rows at or past exact_rows [rows]
  double bounded_row_max_difference = 0;
  std::string first_mismatch;  // empty when everything matched
};

// The reference generation of one request: `prompt` prefilled from row 0 at
// private blocks 0..n-1 of `cache` (nothing shared, nothing reused), the
// first token of rank `branch`, then greedy decoding up to `total_tokens`
// (prompt + generated). Both the exactness replay and an engine serving
// privately (its node gone) generate with it. Errors: the model's and the
// cache's (coordinate_out_of_range when the cache is too small).
Result<std::vector<TokenId>> generate_without_reuse(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                                    std::span<const TokenId> prompt, uint32_t branch,
                                                    size_t total_tokens, model::SequenceBlocks* blocks_out = nullptr);

// The reference generation of a prompt: generate_without_reuse, or for a
// templated prompt (segments given) model::generate_declared_prompt.
Result<std::vector<TokenId>> generate_reference(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                                std::span<const TokenId> prompt,
                                                std::span<const model::DeclaredSegmentRows> segments, uint32_t branch,
                                                size_t total_tokens, model::SequenceBlocks* blocks_out = nullptr);

// Errors: invalid_argument for an inconsistent request (token counts), and
// the model's and caches' own errors (a replay cache too small for the
// request: coordinate_out_of_range).
Result<ReplayVerdict> replay_without_reuse(const model::ReferenceModel& model, model::ModelKvCache& replay_cache,
                                           const model::ModelKvCache& shared, const ReplayedRequest& request);

// A request's verdict into an engine's result: the counts added, and the
// first mismatch kept, prefixed with `request` (who it was).
void add_verdict(EngineResult& result, const ReplayVerdict& verdict, const std::string& request);

}  // namespace kvrt
