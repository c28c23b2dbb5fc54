// See private_generation.hpp.
#include "engine/private_generation.hpp"

#include <algorithm>

#include "engine/engine_replay.hpp"

namespace kvrt::engine {

void note_session_lost(const Error& why, const EngineOptions& o, EngineResult& result) {
  result.session_lost = why.describe();
  ++result.sessions_lost;
  if (o.on_session_lost) o.on_session_lost(why);
}

Result<std::vector<TokenId>> serve_privately(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                             std::span<const TokenId> prompt, uint32_t branch, uint32_t decode_tokens,
                                             const EngineOptions& o, EngineResult& result,
                                             std::span<const model::DeclaredSegmentRows> segments) {
  std::vector<TokenId> tokens;
  KVRT_TRY_ASSIGN(tokens, generate_reference(model, cache, prompt, segments, branch, prompt.size() + decode_tokens));
  ++result.requests;
  ++result.requests_served_privately;
  result.prompt_tokens += prompt.size();
  result.prefill_rows_computed += prompt.size();
  result.decode_rows_computed += decode_tokens - 1;
  result.decode_tokens += decode_tokens;
  if (o.on_progress)
    o.on_progress(EngineProgress{result.requests, result.requests_total,
                                 result.prefill_rows_computed + result.decode_rows_computed});
  return tokens;
}

Status check_decoded_through_lost_node(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                       std::span<const TokenId> decoded, uint32_t prompt_tokens, uint32_t branch,
                                       const std::string& request, const EngineOptions& o, EngineResult& result,
                                       std::span<const model::DeclaredSegmentRows> segments) {
  std::vector<TokenId> tokens;
  KVRT_TRY_ASSIGN(tokens,
                  generate_reference(model, cache, decoded.first(prompt_tokens), segments, branch, decoded.size()));
  if (!std::equal(tokens.begin(), tokens.end(), decoded.begin())) {
    ++result.token_mismatches;
    if (result.first_mismatch.empty())
      result.first_mismatch =
          o.worker_name + " " + request + ": tokens decoded through the lost node differ from the private generation";
  }
  return Status::success();
}

}  // namespace kvrt::engine
