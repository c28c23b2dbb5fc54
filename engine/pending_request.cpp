#include "engine/pending_request.hpp"

#include <algorithm>

namespace kvrt::engine {

PendingRequest turn_request(const workload::Job& job, uint32_t turn, const std::vector<TokenId>& history) {
  PendingRequest p;
  p.job = &job;
  p.turn = turn;
  p.prompt = history;
  const workload::Turn& t = job.turns.at(turn);
  p.prompt.insert(p.prompt.end(), t.user_tokens.begin(), t.user_tokens.end());
  p.decode_tokens = std::max<uint32_t>(1, t.decode_tokens);
  return p;
}

}  // namespace kvrt::engine
