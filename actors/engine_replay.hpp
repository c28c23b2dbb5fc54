#pragma once
// The exactness check of `kvrt run` (issue 8): one finished request replayed
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
// (services/model/reference_model.hpp), any difference is a reuse defect:
// wrong identity, wrong position, or wrong bytes.
#include <cstdint>
#include <span>
#include <string>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/model/model_kv_cache.hpp"
#include "services/model/reference_model.hpp"

namespace kvrt {

struct ReplayedRequest {
  const model::SequenceBlocks* blocks = nullptr;  // the served request's blocks in the shared pools
  std::span<const TokenId> tokens;                // prompt then generated [tokens]
  uint32_t prompt_tokens = 0;
  uint32_t generated = 0;                         // [tokens], >= 1
  uint32_t branch = 0;                            // the first token's rank
  uint32_t reused_rows = 0;                       // rows [0, reused_rows) came from the index [rows]
  uint32_t cached_rows = 0;                       // rows the served request committed [rows]
};

struct ReplayVerdict {
  bool tokens_equal = false;
  uint64_t rows_checked = 0;
  uint64_t reused_rows_checked = 0;
  uint64_t row_mismatches = 0;
  uint64_t reused_row_mismatches = 0;
  std::string first_mismatch;  // empty when everything matched
};

// Errors: invalid_argument for an inconsistent request (token counts), and
// the model's and caches' own errors (a replay cache too small for the
// request: coordinate_out_of_range).
Result<ReplayVerdict> replay_without_reuse(const model::ReferenceModel& model, model::ModelKvCache& replay_cache,
                                           const model::ModelKvCache& shared, const ReplayedRequest& request);

}  // namespace kvrt
