// The private path of a `kvrt run` worker whose session is lost (the node
// died, or ended the session): nothing the node issued is usable any more
// (receipts, blocks, leases; docs/operations.md, "What survives a node
// restart"), so every request of this worker's share that did not finish
// through the node is served here, prefilled from row 0 in the worker's own
// cache with no reuse: the same generation the exactness replay computes,
// so its tokens are exactly those a no-reuse run produces. Requests the
// node had admitted start again from their prompt; their partly decoded
// tokens are checked against the private generation.
#include <algorithm>

#include "engine/engine_loop.hpp"
#include "engine/engine_replay.hpp"

namespace kvrt::engine {

Status EngineLoop::serve_one_privately(const workload::Job& job, uint32_t turn, std::span<const TokenId> prompt,
                                       uint32_t branch, uint32_t decode_tokens, std::vector<TokenId>* tokens_out) {
  std::vector<TokenId> tokens;
  KVRT_TRY_ASSIGN(tokens,
                  generate_without_reuse(model_, *replay_cache_, prompt, branch, prompt.size() + decode_tokens));
  // What the node path had generated of it so far must be a prefix of this.
  for (const LiveRequest& r : live_)
    if (r.job == &job && r.turn == turn && r.branch == branch && !r.failed) {
      const size_t n = std::min(r.tokens.size(), tokens.size());
      if (!std::equal(r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin())) {
        ++result_.token_mismatches;
        if (result_.first_mismatch.empty())
          result_.first_mismatch = o_.worker_name + " job " + std::to_string(job.id) + " turn " + std::to_string(turn) +
                                   ": tokens decoded through the node differ from the " + "private generation";
      }
    }
  ++result_.requests;
  ++result_.requests_served_privately;
  result_.prompt_tokens += prompt.size();
  result_.prefill_rows_computed += prompt.size();
  result_.decode_rows_computed += decode_tokens - 1;
  result_.decode_tokens += decode_tokens;
  if (tokens_out != nullptr) *tokens_out = std::move(tokens);
  if (o_.on_progress)
    o_.on_progress(EngineProgress{result_.requests, result_.requests_total,
                                  result_.prefill_rows_computed + result_.decode_rows_computed});
  return Status::success();
}

Status EngineLoop::serve_privately(const Error& lost) {
  result_.session_lost = lost.describe();
  KVRT_TRY(ensure_private_cache());
  // Nothing of the lost session is released or published: it went with
  // the node (or the node reclaimed it).
  pending_releases_.clear();
  pending_successors_.clear();
  ready_.clear();
  for (const workload::Job* job : jobs_) {
    const Finished& f = finished_[job];
    auto done = [&](uint32_t turn, uint32_t branch) { return f.requests.contains({turn, branch}); };
    switch (job->kind) {
      case workload::JobKind::chat: {
        // Turns finish in order; the next one's prompt carries the history.
        std::vector<TokenId> history = f.history.empty() ? job->prefix : f.history;
        for (uint32_t t = 0; t < job->turns.size(); ++t) {
          if (done(t, 0)) continue;
          const PendingRequest p = turn_request(*job, t, history);
          KVRT_TRY(serve_one_privately(*job, t, p.prompt, 0, p.decode_tokens, &history));
        }
        break;
      }
      case workload::JobKind::fork: {
        if (job->turns.empty()) break;
        const PendingRequest p = turn_request(*job, 0, job->prefix);
        for (uint32_t b = 0; b < std::max<uint32_t>(1, job->branches); ++b)
          if (!done(0, b)) KVRT_TRY(serve_one_privately(*job, 0, p.prompt, b, p.decode_tokens, nullptr));
        break;
      }
      case workload::JobKind::few_shot:
      case workload::JobKind::long_document:
        for (uint32_t t = 0; t < job->turns.size(); ++t) {
          if (done(t, 0)) continue;
          const PendingRequest p = turn_request(*job, t, job->prefix);
          KVRT_TRY(serve_one_privately(*job, t, p.prompt, 0, p.decode_tokens, nullptr));
        }
        break;
    }
  }
  live_.clear();
  return Status::success();
}

}  // namespace kvrt::engine
