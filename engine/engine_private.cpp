// The private path of a `kvrt run` worker whose session is lost (the node
// died, or ended the session): nothing the node issued is usable any more
// (receipts, blocks, leases; docs/operations.md, "What survives a node
// restart"), so every request of this worker's share that did not finish
// through the node is served here, prefilled from row 0 in the worker's own
// cache with no reuse: the same generation the exactness replay computes,
// so its tokens are exactly those a no-reuse run produces. Requests the
// node had admitted start again from their prompt; their partly decoded
// tokens are checked against the private generation. Between requests the
// worker looks for a new node (EngineOptions::reconnect_descriptor) and,
// once one serves, goes on through it.
#include <algorithm>

#include "engine/engine_loop.hpp"
#include "engine/engine_replay.hpp"
#include "engine/private_generation.hpp"
#include "engine/templated_prompt.hpp"

namespace kvrt::engine {

Status EngineLoop::serve_pending_privately(const PendingRequest& p) {
  const Finished& f = finished_[p.job];
  std::vector<TokenId> tokens;
  for (uint32_t b = 0; b < p.branches; ++b) {
    if (f.requests.contains({p.turn, b})) continue;
    const std::vector<model::DeclaredSegmentRows> segments =
        p.job->templated ? declared_segments(*p.job->templated) : std::vector<model::DeclaredSegmentRows>{};
    KVRT_TRY_ASSIGN(tokens, serve_privately(current_model(p.job->namespace_name), *replay_cache_, p.prompt, b,
                                            p.decode_tokens, o_, result_, segments));
    Finished& done = finished_[p.job];
    done.requests.emplace(p.turn, b);
    if (p.job->kind == workload::JobKind::chat) done.history = tokens;
  }
  // A chat's next turn carries this one's conversation, as through the node.
  if (p.job->kind == workload::JobKind::chat && p.turn + 1 < p.job->turns.size())
    ready_.push_back(turn_request(*p.job, p.turn + 1, tokens));
  return Status::success();
}

// The queue rebuilt from the share and what finished: what was admitted,
// half-admitted or waiting is all requeued from its prompt.
Status EngineLoop::requeue_unfinished() {
  ready_.clear();
  for (const workload::Job* job : jobs_) {
    const Finished& f = finished_[job];
    auto done = [&](uint32_t turn, uint32_t branch) { return f.requests.contains({turn, branch}); };
    switch (job->kind) {
      case workload::JobKind::chat: {
        // Turns finish in order: the first unfinished one, with the history.
        uint32_t t = 0;
        while (t < job->turns.size() && done(t, 0)) ++t;
        if (t < job->turns.size()) ready_.push_back(turn_request(*job, t, f.history.empty() ? job->prefix : f.history));
        break;
      }
      case workload::JobKind::fork: {
        if (job->turns.empty()) break;
        PendingRequest p = turn_request(*job, 0, job->prefix);
        p.branches = std::max<uint32_t>(1, job->branches);
        uint32_t finished = 0;
        for (uint32_t b = 0; b < p.branches; ++b) finished += done(0, b) ? 1 : 0;
        // Branches are forked from one prefill: a job some of whose branches
        // finished has the others served here, never forked twice.
        if (finished == 0)
          ready_.push_back(std::move(p));
        else if (finished < p.branches)
          KVRT_TRY(serve_pending_privately(p));
        break;
      }
      case workload::JobKind::few_shot:
      case workload::JobKind::long_document:
      case workload::JobKind::templated:
        for (uint32_t t = 0; t < job->turns.size(); ++t)
          if (!done(t, 0)) ready_.push_back(turn_request(*job, t, job->prefix));
        break;
    }
  }
  return Status::success();
}

Status EngineLoop::recover(const Error& lost) {
  note_session_lost(lost, o_, result_);
  KVRT_TRY(ensure_private_cache());
  // Requests the node had admitted are checked against the private
  // generation before their state goes.
  for (const LiveRequest& r : live_) {
    if (r.failed || r.generated == 0 || finished_[r.job].requests.contains({r.turn, r.branch})) continue;
    KVRT_TRY(check_decoded_through_lost_node(r.weights(), *replay_cache_, r.tokens, r.prompt_tokens, r.branch,
                                             "job " + std::to_string(r.job->id) + " turn " + std::to_string(r.turn), o_,
                                             result_, r.segments));
  }
  // Nothing of the lost session is released or published: it went with
  // the node (or the node reclaimed it).
  live_.clear();
  session_->abandon_reuse_ends();
  seeds_.clear();
  KVRT_TRY(requeue_unfinished());
  while (!ready_.empty()) {
    if (rebind_) {
      Result<std::pair<EngineSession*, model::ModelKvCache*>> bound = rebind_();
      if (bound.ok()) {
        session_ = bound->first;
        observe_calls(*session_);
        shared_ = bound->second;
        if (Status s = authorize_namespaces(); s.ok()) {
          ++result_.reconnects;
          return Status::success();  // the rest through the new node
        }
      }
    }
    const PendingRequest p = std::move(ready_.front());
    ready_.pop_front();
    KVRT_TRY(serve_pending_privately(p));
  }
  return Status::success();
}

}  // namespace kvrt::engine
