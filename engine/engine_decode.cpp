// Steps 4-5 of the engine loop: one decode row per live request,
// then verification, publication, release and the next chat turn. See
// engine_loop.hpp.
#include <algorithm>
#include <climits>
#include <map>

#include "engine/engine_loop.hpp"
#include "engine/session_reuse_policy.hpp"

namespace kvrt::engine {

// 4. One decode row for every live request that needs one: batched appends
// (the allocator copies a shared tail before the first divergent write), one
// batched forward writing the rows, batched commits.
Status EngineLoop::decode_step() {
  AllocatorBatch append{next_trace(), {}};
  std::vector<LiveRequest*> stepping;
  for (LiveRequest& r : live_) {
    if (r.failed || r.generated >= r.decode_target) continue;
    append.ops.push_back(AppendOp{r.fence, {}, std::nullopt});
    stepping.push_back(&r);
  }
  if (stepping.empty()) return Status::success();
  auto appended_result = session_->allocator(append);
  if (!appended_result.ok()) return appended_result.error();
  AllocatorBatchReceipt appended = std::move(appended_result).value();
  std::vector<LiveRequest*> writing;
  size_t waiting = 0;  // appends refused for capacity or quota: retried next iteration
  for (size_t i = 0; i < stepping.size(); ++i) {
    LiveRequest& r = *stepping[i];
    const auto* receipt = std::get_if<AllocationReceipt>(&appended.outcomes[i]);
    if (receipt == nullptr) {
      note_error(std::get<Error>(appended.outcomes[i]));
      r.failed = true;
      continue;
    }
    if (receipt->outcome != AllocationOutcome::committed) {
      // Retried next iteration.
      ++(receipt->outcome == AllocationOutcome::quota_exceeded ? result_.quota_exceeded_retries
                                                               : result_.out_of_capacity_retries);
      ++waiting;
      continue;
    }
    r.fence.generation = receipt->request_generation;
    r.fence.table_version = receipt->table_version_after;
    result_.copy_on_write_rows += receipt->copied_rows;
    KVRT_TRY(apply_entries(r, receipt->published_entries));
    if (receipt->context_tokens_after != r.cached_rows + 1) {
      note_error(make_error(
          ErrorCode::invariant_violated,
          "append receipt context " + std::to_string(receipt->context_tokens_after) + " is not cached rows + 1",
          "context_tokens_after"));
      r.failed = true;
      continue;
    }
    writing.push_back(&r);
  }
  // Every live request of this worker waiting for a block: none of them can
  // free one. Blocks of other workers may come back, so only a wait that
  // lasts preempts.
  stalled_decode_steps_ = writing.empty() && waiting == live_.size() ? stalled_decode_steps_ + 1 : 0;
  if (stalled_decode_steps_ >= preempt_after_steps()) {
    stalled_decode_steps_ = 0;
    KVRT_TRY(preempt_one());
  }
  if (writing.empty()) return Status::success();
  auto logits_result = decode_rows(writing);
  if (!logits_result.ok()) return logits_result.error();
  std::vector<std::vector<float>> logits = std::move(logits_result).value();
  AllocatorBatch commit{next_trace(), {}};
  for (size_t i = 0; i < writing.size(); ++i) {
    LiveRequest& r = *writing[i];
    ++result_.decode_rows_computed;
    r.cached_rows += 1;
    r.tokens.push_back(model::greedy_token(logits[i]));
    if (!r.positions.empty()) r.positions.push_back(r.positions.back() + 1);
    ++r.generated;
    // Built in place: GCC 12 misreads a moved variant temporary here
    // (-Wmaybe-uninitialized on the other alternatives).
    commit.ops.emplace_back(std::in_place_type<CommitRowsOp>, r.fence, r.cached_rows);
  }
  auto committed_result = session_->allocator(commit);
  if (!committed_result.ok()) return committed_result.error();
  AllocatorBatchReceipt committed = std::move(committed_result).value();
  for (size_t i = 0; i < writing.size(); ++i) {
    if (const auto* c = std::get_if<AllocationReceipt>(&committed.outcomes[i])) {
      writing[i]->fence.table_version = c->table_version_after;
    } else {
      note_error(std::get<Error>(committed.outcomes[i]));
      writing[i]->failed = true;
    }
  }
  return Status::success();
}

// The decode rows of one step. Requests that hold the same physical blocks
// for a prefix (the questions over one document, the branches of a fork)
// decode together with shared-prefix execution (0x0BC): the shared K/V is
// read once for the group instead of once per request. A chat turn decodes
// monolithically, because the next turn reuses its decode rows and reuse must
// stay bitwise (the shared-prefix merge rounds differently, see
// engine/model/shared_prefix_decode.cpp); rows computed with shared-prefix
// execution are never published for reuse.
Result<std::vector<std::vector<float>>> EngineLoop::decode_rows(const std::vector<LiveRequest*>& writing) {
  std::vector<std::vector<float>> logits(writing.size());
  // Every decode path reads each request's committed rows (the node's
  // executor in the pools, the worker in its cache) and writes its decode row.
  for (LiveRequest* r : writing) KVRT_TRY(load_staged(*r, r->cached_rows));
  std::vector<size_t> monolithic;
  // (weights, group 0's slot of block 0) -> requests: a group decodes with
  // one model, and requests on other weights never share one.
  std::map<std::pair<const model::ReferenceModel*, uint32_t>, std::vector<size_t>> by_first_slot;
  for (size_t i = 0; i < writing.size(); ++i) {
    const LiveRequest& r = *writing[i];
    // Templated prompts (0x0CB) hold no physically shared blocks: their
    // modules' rows are copies.
    if (o_.shared_prefix && r.job->kind != workload::JobKind::chat && r.job->kind != workload::JobKind::templated &&
        r.cached_rows >= P_)
      by_first_slot[{r.admitted.model, r.blocks.slots[0][0]}].push_back(i);
    else
      monolithic.push_back(i);
  }
  for (auto& [key, members] : by_first_slot) {
    // The physical prefix every member holds: blocks equal in every group, and
    // full (below every member's decode row).
    uint32_t shared_blocks = UINT32_MAX;
    for (size_t i : members) shared_blocks = std::min(shared_blocks, writing[i]->cached_rows / P_);
    for (uint32_t g = 0; g < groups_; ++g)
      for (size_t i : members) {
        const auto& a = writing[members.front()]->blocks.slots[g];
        const auto& b = writing[i]->blocks.slots[g];
        uint32_t j = 0;
        while (j < shared_blocks && a[j] == b[j]) ++j;
        shared_blocks = j;
      }
    if (members.size() < 2 || shared_blocks == 0) {
      monolithic.insert(monolithic.end(), members.begin(), members.end());
      continue;
    }
    if (o_.shared_prefix_site == SharedPrefixSite::node) {
      // The node plans the whole tree (every level the members share, not
      // only the common one) from their tables.
      auto on_node = decode_on_node(*key.first, writing, members);
      if (!on_node.ok()) return on_node.error();
      if (!on_node->has_value()) {
        monolithic.insert(monolithic.end(), members.begin(), members.end());
        continue;
      }
      for (size_t k = 0; k < members.size(); ++k) {
        writing[members[k]]->shared_prefix_decoded = true;
        logits[members[k]] = std::move((**on_node)[k]);
      }
      continue;
    }
    std::vector<model::ForwardChunk> chunks;
    for (size_t i : members)
      chunks.push_back(
          model::ForwardChunk{&writing[i]->blocks, writing[i]->tokens, writing[i]->cached_rows, writing[i]->positions});
    const uint32_t shared_rows = shared_blocks * P_;
    auto out_result = key.first->forward_shared_prefix(*shared_, chunks, shared_rows);
    if (!out_result.ok()) return out_result.error();
    std::vector<std::vector<float>> out = std::move(out_result).value();
    result_.shared_prefix_rows_read_once += shared_rows;
    result_.shared_prefix_rows_per_request += uint64_t{shared_rows} * members.size();
    for (size_t k = 0; k < members.size(); ++k) {
      LiveRequest& r = *writing[members[k]];
      r.shared_prefix_decoded = true;
      result_.decode_kv_bytes_read += uint64_t{r.cached_rows + 1 - shared_rows} * row_bytes_;
      logits[members[k]] = std::move(out[k]);
    }
    result_.decode_kv_bytes_read += uint64_t{shared_rows} * row_bytes_;
    ++result_.shared_prefix_batches;
  }
  if (!monolithic.empty()) {
    std::vector<model::ForwardChunk> chunks;
    std::vector<const model::ReferenceModel*> models;
    for (size_t i : monolithic) {
      chunks.push_back(
          model::ForwardChunk{&writing[i]->blocks, writing[i]->tokens, writing[i]->cached_rows, writing[i]->positions});
      models.push_back(writing[i]->admitted.model);
    }
    auto out_result = forward_by_model(chunks, models);
    if (!out_result.ok()) return out_result.error();
    std::vector<std::vector<float>> out = std::move(out_result).value();
    for (size_t k = 0; k < monolithic.size(); ++k) {
      LiveRequest& r = *writing[monolithic[k]];
      result_.decode_kv_bytes_read += uint64_t{r.cached_rows + 1} * row_bytes_;
      if (!r.shared_prefix_decoded) r.exact_rows = r.cached_rows + 1;
      logits[monolithic[k]] = std::move(out[k]);
    }
  }
  for (LiveRequest* r : writing) KVRT_TRY(store_staged(*r, r->cached_rows + 1));
  return logits;
}

// 5. Finished requests: verified against a no-reuse replay, their full blocks
// published (a later turn or question finds them), released; a chat's next
// turn becomes ready with the conversation so far.
uint32_t EngineLoop::preempt_after_steps() const {
  // Workers that wait on each other's blocks should not all give up at the
  // same step: each waits a number of steps of its own.
  return kPreemptAfterStalledSteps * (1 + static_cast<uint32_t>(std::hash<std::string>{}(o_.worker_name) % 4));
}

Status EngineLoop::preempt_one() {
  // The most recently admitted request that was prefilled from its own
  // prompt (a fork's branch cannot be forked again alone; an older request
  // is closer to finishing) and that was not preempted too often already: a
  // request that can never fit waits, and the run's stall check names it.
  auto victim = std::find_if(live_.rbegin(), live_.rend(), [&](const LiveRequest& r) {
    const auto it = preemptions_.find({r.job, r.turn});
    return !r.failed && r.branch == 0 && (it == preemptions_.end() || it->second < kMaxPreemptions);
  });
  if (victim == live_.rend()) return Status::success();
  // Prompt blocks waiting to be published as a reuse attempt's successor go
  // first, while the request still holds them (as in finish()).
  if (session_->successor_pending(victim->fence.request)) KVRT_TRY(release_receipts());
  auto released =
      session_->allocator(AllocatorBatch{next_trace(), {ReleaseOp{victim->fence, ReleaseReason::preempted}}});
  if (!released.ok()) return released.error();
  if (const auto* e = std::get_if<Error>(&released->outcomes.at(0))) {
    note_error(*e);
    victim->failed = true;
    return Status::success();
  }
  // Served again from its prompt, first in line: the same tokens (decoding
  // is deterministic), its rows computed again.
  PendingRequest again;
  again.job = victim->job;
  again.turn = victim->turn;
  again.prompt.assign(victim->tokens.begin(), victim->tokens.begin() + victim->prompt_tokens);
  again.decode_tokens = victim->decode_target;
  ready_.push_front(std::move(again));
  ++preemptions_[{victim->job, victim->turn}];
  live_.erase(std::next(victim).base());
  admission_held_ = true;
  ++result_.requests_preempted;
  return Status::success();
}

Status EngineLoop::finish() {
  const bool tails = node_publishes_partial_tails(session_->session());
  PrefixBatch publish{next_trace(), {}};
  AllocatorBatch release{next_trace(), {}};
  std::vector<LiveRequest> remaining, done;
  const uint64_t verified_before = result_.requests_verified;
  for (LiveRequest& r : live_) {
    if (!r.failed && r.generated < r.decode_target) {
      remaining.push_back(std::move(r));
      continue;
    }
    if (!r.failed && o_.verify) verify(r);
    const uint32_t first = std::max(r.published_blocks, r.hit_tokens / P_);
    const uint32_t exact = std::min(r.cached_rows, r.exact_rows);
    const uint32_t full = exact / P_;
    // Under the partial-tail policy the last, partly filled block is
    // published too, now that no append will follow: a later turn or a
    // request with the same prefix reuses every row, not only whole blocks.
    const uint32_t tail = tails && full >= first ? exact % P_ : 0;
    // A templated prompt's rows are not a causal prefill of its tokens
    // (0x0CB): never published to the prefix index.
    if (!r.failed && o_.reuse && r.segments.empty() && (full > first || tail > 0))
      publish.ops.push_back(
          PrefixPublishOp{r.job->namespace_name, r.fence.request,
                          std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + exact - (exact % P_) + tail), first,
                          full, identity_of(r.admitted.adapter), r.admitted.generation, tail});
    // Built in place (GCC 12 -Wmaybe-uninitialized on a moved variant temporary).
    release.ops.emplace_back(std::in_place_type<ReleaseOp>, r.fence,
                             r.failed ? ReleaseReason::cancelled : ReleaseReason::finished);
    done.push_back(std::move(r));
  }
  live_ = std::move(remaining);
  if (done.empty()) return Status::success();
  // Histories are read from the blocks before the release gives them back.
  if (o_.session_tier) KVRT_TRY(save_sessions(done));
  admission_held_ = false;  // blocks come back: a preempted request may start again
  // A request whose prompt blocks still wait to be published as its reuse
  // attempt's successor has them sent now, while it still holds them.
  // A request counts as verified once it finished: one whose release the
  // node never answered is served again (a lost session: privately).
  auto unfinished = [&](const Error& e) {
    result_.requests_verified = verified_before;
    return e;
  };
  for (const LiveRequest& r : done)
    if (session_->successor_pending(r.fence.request)) {
      if (Status s = release_receipts(); !s.ok()) return unfinished(s.error());
      break;
    }
  if (Status s = publish_batch(publish); !s.ok()) return unfinished(s.error());
  auto released_result = session_->allocator(release);
  if (!released_result.ok()) return unfinished(released_result.error());
  AllocatorBatchReceipt released = std::move(released_result).value();
  for (size_t i = 0; i < done.size(); ++i) {
    if (const auto* e = std::get_if<Error>(&released.outcomes[i])) note_error(*e);
    LiveRequest& r = done[i];
    if (r.failed) {
      ++failed_requests_;
      continue;
    }
    ++result_.requests;
    result_.decode_tokens += r.generated;
    Finished& f = finished_[r.job];
    f.requests.emplace(r.turn, r.branch);
    if (r.job->kind == workload::JobKind::chat) f.history = r.tokens;
    if (r.job->kind == workload::JobKind::chat && r.turn + 1 < r.job->turns.size())
      ready_.push_back(turn_request(*r.job, r.turn + 1, r.tokens));
  }
  if (o_.on_progress)
    o_.on_progress(EngineProgress{result_.requests, result_.requests_total,
                                  result_.prefill_rows_computed + result_.decode_rows_computed});
  return Status::success();
}

}  // namespace kvrt::engine
