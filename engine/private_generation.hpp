#pragma once
// The private path both engine loops take when their session is lost (the
// paged loop in engine_private.cpp, the loop over virtual reservations in
// virtual_engine.cpp): nothing the lost node issued is usable any more, so
// a request is generated from its prompt in the worker's own cache with no
// reuse, which is the generation the exactness replay computes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_worker.hpp"
#include "engine/model/declared_prompt_rows.hpp"
#include "engine/model/model_kv_cache.hpp"
#include "engine/model/reference_model.hpp"

namespace kvrt::engine {

// The session is lost: recorded in `result` and reported to
// o.on_session_lost.
void note_session_lost(const Error& why, const EngineOptions& o, EngineResult& result);

// One request (one branch) served privately: generated in `cache`, counted
// as served privately (its prompt computed, its decode tokens generated),
// progress reported. Returns the tokens, prompt then generated.
// A templated prompt (segments given) is generated under Prompt Cache's
// contract (model::generate_declared_prompt), as the replay checks it.
Result<std::vector<TokenId>> serve_privately(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                             std::span<const TokenId> prompt, uint32_t branch, uint32_t decode_tokens,
                                             const EngineOptions& o, EngineResult& result,
                                             std::span<const model::DeclaredSegmentRows> segments = {});

// A request the lost node had started: the tokens it decoded through the
// node (`decoded`, prompt first) must be those of the private generation; a
// difference is a token mismatch, named "<worker> <request>: ...".
Status check_decoded_through_lost_node(const model::ReferenceModel& model, model::ModelKvCache& cache,
                                       std::span<const TokenId> decoded, uint32_t prompt_tokens, uint32_t branch,
                                       const std::string& request, const EngineOptions& o, EngineResult& result,
                                       std::span<const model::DeclaredSegmentRows> segments = {});

}  // namespace kvrt::engine
