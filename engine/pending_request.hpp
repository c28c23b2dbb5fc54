#pragma once
// A request of a workload job waiting to be served, as both engine loops
// (paged blocks, engine_loop.hpp; virtual slots, virtual_engine.hpp) queue it.
#include <cstdint>
#include <vector>

#include "services/common/ids.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt::engine {

// A request waiting for admission: a chat turn (whose prompt carries the
// conversation so far), a question, or a fork job's shared prompt.
struct PendingRequest {
  const workload::Job* job = nullptr;
  uint32_t turn = 0;
  std::vector<TokenId> prompt;
  uint32_t decode_tokens = 0;
  uint32_t branches = 1;
};

// Turn `turn` of `job` after `history` (the conversation so far, or the
// job's prefix): its prompt is history + the turn's user tokens, and it
// generates the turn's decode tokens (at least one).
PendingRequest turn_request(const workload::Job& job, uint32_t turn, const std::vector<TokenId>& history);

}  // namespace kvrt::engine
