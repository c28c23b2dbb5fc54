// Steps 1-3 of the engine loop: cache-aware admission, one prefix
// message, allocation with the hits, then prefill, commit, early publication
// and the fork of sampling branches. See engine_loop.hpp.
#include <algorithm>
#include <chrono>

#include "engine/engine_loop.hpp"

namespace kvrt::engine {

Status EngineLoop::admit() {
  // After a preemption nothing new starts until a live request finished:
  // the preempted request, first in line, would take back the blocks it
  // just gave up and stall the others again.
  if (admission_held_ && !live_.empty()) return Status::success();
  admission_held_ = false;
  uint32_t budget = live_.size() < o_.in_flight ? o_.in_flight - static_cast<uint32_t>(live_.size()) : 0;
  budget = std::min(budget, admission_round_cap_);
  // Cache-aware admission (first_block_seeds.hpp). With reuse off nothing
  // waits.
  std::vector<PendingRequest> fresh, deferred, templated;
  while (!ready_.empty() &&
         (budget >= ready_.front().branches || (live_.empty() && fresh.empty() && templated.empty()))) {
    PendingRequest p = std::move(ready_.front());
    ready_.pop_front();
    // A namespace this worker holds no grant for yet (a purge had closed it
    // when the worker authorized) waits: without the grant it cannot know
    // which weights the generation computes with, and rows computed with
    // guessed weights must never be published into it.
    if (!views_.contains(p.job->namespace_name)) {
      deferred.push_back(std::move(p));
      continue;
    }
    if (p.job->kind == workload::JobKind::templated) {
      budget -= std::min(budget, p.branches);
      templated.push_back(std::move(p));
      continue;
    }
    if (o_.reuse && seeds_.defers(p.job->namespace_name, p.prompt, P_)) {
      deferred.push_back(std::move(p));
      continue;
    }
    budget -= std::min(budget, p.branches);
    fresh.push_back(std::move(p));
  }
  for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) ready_.push_front(std::move(*it));
  seeds_.end_round();
  std::vector<PendingRequest> no_room;
  for (PendingRequest& p : templated) {
    bool admitted = false;
    KVRT_TRY_ASSIGN(admitted, admit_templated(p));
    if (!admitted) no_room.push_back(std::move(p));
  }
  for (auto it = no_room.rbegin(); it != no_room.rend(); ++it) ready_.push_front(std::move(*it));
  if (fresh.empty()) return release_receipts();

  // 1. One reuse message for every new request: the node runs the
  // executable-reuse transaction (0x0CD) for each (authorization before
  // lookup, candidate, leases, versions, mapping, snapshot) and answers a
  // receipt whose blocks are leased to this session, or the step and reason
  // that ended the attempt. The same message ends the previous iteration's
  // receipts (steps 9-10): their blocks are the requests' own by now, and
  // their leases go back.
  std::vector<AdmissionRequest> asks;
  for (const PendingRequest& p : fresh)
    asks.push_back(AdmissionRequest{p.job->namespace_name, p.prompt,
                                    identity_of(views_.at(p.job->namespace_name).adapter), LogitsPath::logits_required,
                                    std::nullopt});
  // 2. Allocate with the receipts' blocks, which the leases keep current.
  // A hit that ends inside a block (the node's immutable partial-tail
  // policy, 0x07D) names that block last: the allocator copies its rows into
  // the request's own block instead of sharing it.
  const TraceContext reuse_trace = next_trace();
  auto answered = session_->admit(asks, o_.reuse, reuse_trace, next_trace());
  take_end_notes();
  if (!answered.ok()) return answered.error();
  std::vector<std::optional<FunnelOutcome>> attempt(fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    const Admission& a = (*answered)[i];
    if (a.hit) {
      // The node's own word on the hit's generation, against the grant the
      // request is admitted under: rows of another generation were computed
      // with other weights (0x01A). Never expected; an error of the run.
      if (const NamespaceGeneration g = views_.at(fresh[i].job->namespace_name).generation;
          a.hit->namespace_generation != g) {
        ++result_.foreign_generation_hits;
        note_error(make_error(ErrorCode::invariant_violated,
                              "a reuse receipt of generation " + std::to_string(a.hit->namespace_generation.value) +
                                  " answered a request admitted under generation " + std::to_string(g.value),
                              "namespace_generation"));
      }
      attempt[i] = FunnelOutcome::hit();
    } else if (a.rejection) {
      attempt[i] = FunnelOutcome::rejected(a.rejection->reason);
      if (is_stale_namespace(a.rejection->reason)) note_stale_generation();
    } else if (a.reuse_error) {
      note_error(*a.reuse_error);
    }
  }
  std::vector<LiveRequest> admitted;
  std::vector<PendingRequest> sources;
  std::vector<PendingRequest> requeue;
  for (size_t i = 0; i < fresh.size(); ++i) {
    // A reuse receipt whose blocks this allocation did not take ends next
    // iteration as not executed (the session queued it); one whose blocks it
    // took ends after the prefill (which reads them), see the publication below.
    const Admission& a = (*answered)[i];
    const AllocationReceipt* receipt = a.allocation ? &*a.allocation : nullptr;
    if (receipt == nullptr) {
      const Error& e = *a.allocation_error;
      // A leased hit goes stale only when a purge revoked its receipt first
      // (its release answers reuse_receipt_revoked): served again, with a
      // new lookup at the successor generation.
      if (a.hit_withdrawn()) {
        ++result_.hits_withdrawn;
        requeue.push_back(std::move(fresh[i]));
        continue;
      }
      // Refused outright otherwise: the request is not served; the run
      // counts the error and the missing request.
      note_error(e);
      ++failed_requests_;
      continue;
    }
    if (receipt->outcome != AllocationOutcome::committed) {
      // No room now (in the pool, or in the namespace's quota): retried next
      // iteration with a new attempt.
      ++(receipt->outcome == AllocationOutcome::quota_exceeded ? result_.quota_exceeded_retries
                                                               : result_.out_of_capacity_retries);
      requeue.push_back(std::move(fresh[i]));
      continue;
    }
    // One funnel record per attempt whose allocation settled.
    if (attempt[i]) funnel_.record(*attempt[i]);
    LiveRequest r;
    r.job = fresh[i].job;
    r.turn = fresh[i].turn;
    r.tokens = fresh[i].prompt;
    r.prompt_tokens = static_cast<uint32_t>(r.tokens.size());
    r.decode_target = fresh[i].decode_tokens;
    r.hit_tokens = a.hit_tokens();
    r.reuse_snapshot = a.reuse_attempt();
    r.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
    r.blocks.slots.resize(groups_);
    r.admitted = views_.at(r.job->namespace_name);  // admission waits for a view (above)
    if (r.admitted.model != &model_) ++result_.requests_on_successor_weights;
    KVRT_TRY(apply_entries(r, receipt->published_entries));
    admitted.push_back(std::move(r));
    sources.push_back(std::move(fresh[i]));
  }
  // Refused requests go back to the front, in order, for the next iteration.
  for (auto it = requeue.rbegin(); it != requeue.rend(); ++it) ready_.push_front(std::move(*it));
  // Every allocation of the round refused for room: fewer next round, so
  // that fewer hits are leased at once (admission_round_cap_).
  if (admitted.empty() && !requeue.empty())
    admission_round_cap_ = std::max<uint32_t>(1, static_cast<uint32_t>(fresh.size()) / 2);
  else if (!admitted.empty())
    admission_round_cap_ = UINT32_MAX;
  if (admitted.empty()) return Status::success();
  if (o_.session_tier) KVRT_TRY(resume_sessions(admitted));
  return prefill(admitted, sources);
}

// 3. Prefill every admitted request's suffix in one batched forward, commit
// the rows, choose the first tokens and fork the sampling branches.
Status EngineLoop::prefill(std::vector<LiveRequest>& admitted, std::vector<PendingRequest>& sources) {
  std::vector<model::ForwardChunk> chunks;
  std::vector<const model::ReferenceModel*> models;
  for (LiveRequest& r : admitted) {
    // The hit's rows are in the pools; the resumed rows were written into
    // the cache and are stored below with the computed ones.
    KVRT_TRY(load_staged(r, r.hit_tokens));
    chunks.push_back(model::ForwardChunk{&r.blocks, r.tokens, r.hit_tokens + r.resumed_rows, r.positions});
    models.push_back(r.admitted.model);
  }
  const auto forward_started = std::chrono::steady_clock::now();
  auto logits_result = forward_by_model(chunks, models);
  result_.prefill_compute_us += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - forward_started)
          .count());
  if (!logits_result.ok()) return logits_result.error();
  std::vector<std::vector<float>> logits = std::move(logits_result).value();
  AllocatorBatch commit{next_trace(), {}};
  for (LiveRequest& r : admitted) {
    KVRT_TRY(store_staged(r, r.prompt_tokens));
    result_.prefill_rows_computed += r.prompt_tokens - r.hit_tokens - r.resumed_rows;
    result_.prefill_rows_reused += r.hit_tokens;
    result_.prompt_tokens += r.prompt_tokens;
    commit.ops.push_back(CommitRowsOp{r.fence, r.prompt_tokens});
  }
  auto committed_result = session_->allocator(commit);
  if (!committed_result.ok()) return committed_result.error();
  AllocatorBatchReceipt committed = std::move(committed_result).value();
  for (size_t i = 0; i < admitted.size(); ++i) {
    LiveRequest& r = admitted[i];
    if (const auto* c = std::get_if<AllocationReceipt>(&committed.outcomes[i])) {
      r.fence.table_version = c->table_version_after;
      r.cached_rows = r.prompt_tokens;
      r.exact_rows = r.prompt_tokens;
    } else {
      note_error(std::get<Error>(committed.outcomes[i]));
      r.failed = true;
    }
  }

  // The prompt's full blocks are published as soon as their rows are
  // committed (not when the request ends), so a request admitted in the next
  // iteration already finds them: the vLLM habit of caching a block once it
  // is full. A request that reused a receipt's blocks publishes them as that
  // attempt's successor (0x0CD step 10) in the next reuse message, whose
  // successor stage runs before its lookups; the others through the prefix
  // owner now. Every receipt's attempt ends executed: the prefill read its rows.
  if (o_.reuse) {
    PrefixBatch publish{next_trace(), {}};
    for (LiveRequest& r : admitted) {
      const uint32_t first = r.hit_tokens / P_, full = r.cached_rows / P_;
      const bool publishes = !r.failed && full > first;
      if (r.reuse_snapshot) {
        std::optional<ReuseSuccessor> successor;
        if (publishes)
          successor = ReuseSuccessor{r.fence.request,
                                     std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + full * P_), full};
        session_->end_reuse(*r.reuse_snapshot, true, std::move(successor));
        r.reuse_snapshot.reset();
      } else if (publishes) {
        publish.ops.push_back(PrefixPublishOp{r.job->namespace_name, r.fence.request,
                                              std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + full * P_),
                                              first, full, identity_of(r.admitted.adapter), r.admitted.generation});
      }
      r.published_blocks = std::max(first, full);
    }
    KVRT_TRY(publish_batch(publish));
  }

  // Fork branches share every prompt block by reference (0x05C); each branch
  // starts from another of the best first tokens and then decodes greedily.
  AllocatorBatch fork{next_trace(), {}};
  std::vector<std::pair<size_t, uint32_t>> fork_of;  // (admitted index, branch)
  std::vector<std::vector<TokenId>> firsts(admitted.size());
  for (size_t i = 0; i < admitted.size(); ++i) {
    const uint32_t branches = admitted[i].failed ? 1 : sources[i].branches;
    firsts[i] = model::ranked_tokens(logits[i], branches);
    for (uint32_t b = 1; b < branches; ++b) {
      fork.ops.emplace_back(std::in_place_type<ForkOp>, admitted[i].fence);  // in place: see the reuse op above
      fork_of.emplace_back(i, b);
    }
  }
  std::vector<LiveRequest> children;
  if (!fork.ops.empty()) {
    auto forked_result = session_->allocator(fork);
    if (!forked_result.ok()) return forked_result.error();
    AllocatorBatchReceipt forked = std::move(forked_result).value();
    for (size_t k = 0; k < fork_of.size(); ++k) {
      const auto [i, b] = fork_of[k];
      const auto* receipt = std::get_if<AllocationReceipt>(&forked.outcomes[k]);
      if (receipt == nullptr || receipt->outcome != AllocationOutcome::committed) {
        if (receipt == nullptr)
          note_error(std::get<Error>(forked.outcomes[k]));
        else
          ++result_.out_of_capacity_retries;
        ++failed_requests_;  // this branch is not served; the run reports it
        continue;
      }
      LiveRequest child = admitted[i];
      child.branch = b;
      child.hit_tokens = 0;  // its prompt rows are shared by the fork, not found by the index
      child.resumed_rows = 0;
      child.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
      child.blocks.slots.assign(groups_, {});
      KVRT_TRY(apply_entries(child, receipt->published_entries));
      child.tokens.push_back(firsts[i][b]);
      child.generated = 1;
      ++result_.forked_requests;
      result_.prompt_tokens += child.prompt_tokens;
      result_.prefill_rows_forked += child.prompt_tokens;
      children.push_back(std::move(child));
    }
  }
  for (size_t i = 0; i < admitted.size(); ++i) {
    admitted[i].tokens.push_back(firsts[i][0]);
    admitted[i].generated = 1;
    live_.push_back(std::move(admitted[i]));
  }
  for (LiveRequest& c : children) live_.push_back(std::move(c));
  return Status::success();
}

}  // namespace kvrt::engine
