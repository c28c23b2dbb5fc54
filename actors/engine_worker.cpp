// The engine loop of a `kvrt run` worker (issue 8): see engine_worker.hpp.
#include "actors/engine_worker.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <thread>

#include <unistd.h>

#include "actors/client.hpp"
#include "actors/engine_replay.hpp"
#include "services/identity/layout_loader.hpp"
#include "services/tracing/chrome_trace.hpp"
#include "shm/shm_model_kv_cache.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// A request waiting for admission: a chat turn (whose prompt carries the
// conversation so far), a question, or a fork job's shared prompt.
struct PendingRequest {
  const workload::Job* job = nullptr;
  uint32_t turn = 0;
  std::vector<TokenId> prompt;
  uint32_t decode_tokens = 0;
  uint32_t branches = 1;
  uint32_t stale_retries = 0;  // allocations refused because a hit went stale (0x0CD)
};

class EngineLoop {
 public:
  EngineLoop(Client& client, const model::ReferenceModel& model, model::ModelKvCache& shared,
             const EngineOptions& o, std::vector<const workload::Job*> jobs)
      : client_(client), model_(model), shared_(shared), o_(o), jobs_(std::move(jobs)),
        P_(shared.layout().allocator_block_size), groups_(static_cast<uint32_t>(shared.layout().cache_groups.size())),
        row_bytes_(shared.layout().row_bytes()) {
    result_.worker = o.worker_name;
    for (const workload::Job* job : jobs_) {
      result_.requests_total += job->kind == workload::JobKind::fork ? job->branches : job->turns.size();
      enqueue_job(*job);
    }
  }

  Result<EngineResult> run() {
    const Clock::time_point start = Clock::now();
    KVRT_TRY(authorize_namespaces());
    if (o_.on_progress) o_.on_progress(EngineProgress{0, result_.requests_total, 0});
    Clock::time_point stalled_since = Clock::now();
    while (!ready_.empty() || !live_.empty()) {
      const uint64_t before = progress_marker();
      KVRT_TRY(admit());
      KVRT_TRY(decode_step());
      KVRT_TRY(finish());
      if (progress_marker() != before) {
        stalled_since = Clock::now();
      } else {
        // Nothing moved: every admission and append was refused for capacity
        // (other workers hold the blocks). Wait for them; a pool too small
        // for even one request is a configuration error, not a hang.
        if (Clock::now() - stalled_since > std::chrono::seconds(30))
          return make_error(ErrorCode::run_stalled,
                            o_.worker_name + " made no progress for 30 s: the pools cannot hold its requests",
                            "blocks_per_group");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    result_.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    return result_;
  }

 private:
  struct LiveRequest {
    const workload::Job* job = nullptr;
    uint32_t turn = 0;
    uint32_t branch = 0;              // fork branch; 0 = the request that was prefilled
    std::vector<TokenId> tokens;      // prompt, then generated
    uint32_t prompt_tokens = 0;
    uint32_t decode_target = 0;       // tokens to generate [tokens]
    uint32_t hit_tokens = 0;          // prompt rows reused from the index [rows]
    uint32_t cached_rows = 0;         // committed rows [rows]
    uint32_t generated = 0;           // [tokens]
    uint32_t published_blocks = 0;    // blocks [0, published_blocks) are in the index [blocks]
    bool failed = false;              // a typed error ended it; released, not verified
    RequestFence fence;
    model::SequenceBlocks blocks;     // slots[g][j]
  };

  uint64_t progress_marker() const {
    return result_.requests + result_.prefill_rows_computed + result_.decode_rows_computed + failed_requests_;
  }

  void enqueue_job(const workload::Job& job) {
    switch (job.kind) {
      case workload::JobKind::chat:
        if (!job.turns.empty()) ready_.push_back(turn_request(job, 0, job.prefix));
        break;
      case workload::JobKind::fork: {
        PendingRequest p = turn_request(job, 0, job.prefix);
        p.branches = std::max<uint32_t>(1, job.branches);
        ready_.push_back(std::move(p));
        break;
      }
      case workload::JobKind::few_shot:
      case workload::JobKind::long_document:
        // Independent questions over one shared prefix.
        for (uint32_t t = 0; t < job.turns.size(); ++t) ready_.push_back(turn_request(job, t, job.prefix));
        break;
    }
  }

  static PendingRequest turn_request(const workload::Job& job, uint32_t turn, const std::vector<TokenId>& history) {
    PendingRequest p;
    p.job = &job;
    p.turn = turn;
    p.prompt = history;
    const workload::Turn& t = job.turns.at(turn);
    p.prompt.insert(p.prompt.end(), t.user_tokens.begin(), t.user_tokens.end());
    p.decode_tokens = std::max<uint32_t>(1, t.decode_tokens);
    return p;
  }

  TraceContext next_trace() { return TraceContext{(uint64_t(::getpid()) << 32) ^ ++span_, span_, 0}; }

  void note_error(const Error& e) {
    ++result_.operation_errors;
    if (result_.first_error.empty()) result_.first_error = e.describe();
  }

  Result<AllocatorBatchReceipt> call_allocator(const AllocatorBatch& batch) {
    const Clock::time_point t0 = Clock::now();
    Result<AllocatorBatchReceipt> r = client_.allocator(batch);
    result_.allocator_us.push_back(micros_since(t0));
    return r;
  }
  Result<PrefixBatchReceipt> call_prefix(const PrefixBatch& batch) {
    const Clock::time_point t0 = Clock::now();
    Result<PrefixBatchReceipt> r = client_.prefix(batch);
    result_.prefix_us.push_back(micros_since(t0));
    return r;
  }

  Status publish_batch(const PrefixBatch& publish) {
    if (publish.ops.empty()) return Status::success();
    auto published = call_prefix(publish);
    if (!published.ok()) return published.error();
    for (const PrefixOutcome& o : published->outcomes)
      if (const auto* e = std::get_if<Error>(&o)) note_error(*e);
    return Status::success();
  }

  Status authorize_namespaces() {
    std::set<std::string> names;
    for (const workload::Job* job : jobs_) names.insert(job->namespace_name);
    for (const std::string& ns : names) {
      const Clock::time_point t0 = Clock::now();
      Result<NamespaceGrantReceipt> grant = client_.authorize(ns, next_trace());
      result_.authorize_us.push_back(micros_since(t0));
      if (!grant.ok()) return grant.error();
    }
    return Status::success();
  }

  uint32_t group_index(CacheGroupId group) const {
    for (uint32_t g = 0; g < groups_; ++g)
      if (shared_.layout().cache_groups[g].group_id == group) return g;
    return groups_;
  }
  Status apply_entries(LiveRequest& r, const std::vector<TableEntryUpdate>& entries) {
    for (const TableEntryUpdate& e : entries) {
      const uint32_t g = group_index(e.handle.group);
      if (g == groups_)
        return make_error(ErrorCode::unknown_group, "a receipt names a cache group this layout lacks", "group");
      auto& slots = r.blocks.slots[g];
      if (slots.size() <= e.logical_block) slots.resize(e.logical_block + 1);
      slots[e.logical_block] = e.handle.block.value;  // the node's pools use block id == slot
    }
    return Status::success();
  }

  // One funnel record per lookup whose allocation settled (0x0CF).
  void record_funnel(const FunnelOutcome& outcome) {
    funnel_.record(outcome);
  }

  Status admit();
  Status prefill(std::vector<LiveRequest>& admitted, std::vector<PendingRequest>& sources);
  Status decode_step();
  Status finish();
  void verify(const LiveRequest& r);

  Client& client_;
  const model::ReferenceModel& model_;
  model::ModelKvCache& shared_;
  const EngineOptions& o_;
  std::vector<const workload::Job*> jobs_;
  uint32_t P_, groups_;
  uint64_t row_bytes_;
  using FirstBlockKey = std::pair<std::string, std::vector<TokenId>>;  // (namespace, first P tokens)
  std::set<FirstBlockKey> seeded_keys_;
  std::deque<PendingRequest> ready_;
  std::vector<LiveRequest> live_;
  EngineResult result_;
  ReuseFunnel funnel_;
  std::unique_ptr<model::LocalModelKvCache> replay_cache_;
  uint64_t span_ = 0, failed_requests_ = 0;

 public:
  const ReuseFunnel& funnel() const { return funnel_; }
};

Status EngineLoop::admit() {
  uint32_t budget = live_.size() < o_.in_flight ? o_.in_flight - static_cast<uint32_t>(live_.size()) : 0;
  // Cache-aware admission: while no request of this worker has yet started
  // with a given first block, only one such request is admitted per
  // iteration; the others wait one iteration and then find its published
  // prefix instead of computing the same rows side by side (SGLang's
  // in-batch prefix deduplication). With reuse off nothing waits.
  std::vector<PendingRequest> fresh, deferred;
  std::set<FirstBlockKey> batch_keys;
  while (!ready_.empty() && (budget >= ready_.front().branches || (live_.empty() && fresh.empty()))) {
    PendingRequest p = std::move(ready_.front());
    ready_.pop_front();
    if (o_.reuse && p.prompt.size() > P_) {
      FirstBlockKey key{p.job->namespace_name, std::vector<TokenId>(p.prompt.begin(), p.prompt.begin() + P_)};
      if (!seeded_keys_.contains(key) && !batch_keys.insert(std::move(key)).second) {
        deferred.push_back(std::move(p));
        continue;
      }
    }
    budget -= std::min(budget, p.branches);
    fresh.push_back(std::move(p));
  }
  for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) ready_.push_front(std::move(*it));
  seeded_keys_.insert(batch_keys.begin(), batch_keys.end());
  if (fresh.empty()) return Status::success();

  // 1. One prefix message for every new request (authorization before lookup
  // is the node's business, 0x0CE).
  std::vector<uint32_t> hits(fresh.size(), 0);
  std::vector<std::vector<PhysicalBlockHandle>> hit_handles(fresh.size());
  if (o_.reuse) {
    PrefixBatch match{next_trace(), {}};
    for (const PendingRequest& p : fresh)
      match.ops.push_back(PrefixMatchOp{p.job->namespace_name, RequestId{0}, RequestGeneration{0}, p.prompt,
                                        LogitsPath::logits_required});
    auto matched_result = call_prefix(match);
    if (!matched_result.ok()) return matched_result.error();
    PrefixBatchReceipt matched = std::move(matched_result).value();
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (const auto* m = std::get_if<PrefixMatchReceipt>(&matched.outcomes[i])) {
        // A request retried after a stale hit goes without one (0x0CD: a
        // failed reuse falls back to recomputation, never to a wait).
        if (fresh[i].stale_retries >= 2) continue;
        hits[i] = m->runtime_hit_tokens;
        for (const MatchedBlockBundle& b : m->matched_group_handles)
          hit_handles[i].insert(hit_handles[i].end(), b.handles.begin(), b.handles.end());
      } else {
        const Error& e = std::get<Error>(matched.outcomes[i]);
        note_error(e);
        record_funnel(FunnelOutcome::rejected(RejectionReason::unauthenticated));
      }
    }
  }

  // 2. Allocate with the hits.
  AllocatorBatch alloc{next_trace(), {}};
  for (size_t i = 0; i < fresh.size(); ++i)
    alloc.ops.push_back(AllocateOp{static_cast<uint32_t>(fresh[i].prompt.size()), hit_handles[i], std::nullopt});
  auto allocated_result = call_allocator(alloc);
  if (!allocated_result.ok()) return allocated_result.error();
  AllocatorBatchReceipt allocated = std::move(allocated_result).value();
  std::vector<LiveRequest> admitted;
  std::vector<PendingRequest> sources;
  std::vector<PendingRequest> requeue;
  for (size_t i = 0; i < fresh.size(); ++i) {
    const auto* receipt = std::get_if<AllocationReceipt>(&allocated.outcomes[i]);
    if (receipt == nullptr) {
      // A hit block recycled between match and allocate: the allocator's
      // generation fence refused the stale receipt (0x0CD step 5).
      if (o_.reuse) record_funnel(FunnelOutcome::rejected(RejectionReason::stale_candidate_generation));
      if (hits[i] == 0) note_error(std::get<Error>(allocated.outcomes[i]));
      ++fresh[i].stale_retries;
      requeue.push_back(std::move(fresh[i]));
      continue;
    }
    if (receipt->outcome != AllocationOutcome::committed) {
      ++result_.out_of_capacity_retries;
      requeue.push_back(std::move(fresh[i]));
      continue;
    }
    if (o_.reuse)
      record_funnel(hits[i] > 0 ? FunnelOutcome::hit() : FunnelOutcome::rejected(RejectionReason::no_candidate));
    LiveRequest r;
    r.job = fresh[i].job;
    r.turn = fresh[i].turn;
    r.tokens = fresh[i].prompt;
    r.prompt_tokens = static_cast<uint32_t>(r.tokens.size());
    r.decode_target = fresh[i].decode_tokens;
    r.hit_tokens = hits[i];
    r.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
    r.blocks.slots.resize(groups_);
    KVRT_TRY(apply_entries(r, receipt->published_entries));
    admitted.push_back(std::move(r));
    sources.push_back(std::move(fresh[i]));
  }
  // Refused requests go back to the front, in order, for the next iteration.
  for (auto it = requeue.rbegin(); it != requeue.rend(); ++it) ready_.push_front(std::move(*it));
  if (admitted.empty()) return Status::success();
  return prefill(admitted, sources);
}

// 3. Prefill every admitted request's suffix in one batched forward, commit
// the rows, choose the first tokens and fork the sampling branches.
Status EngineLoop::prefill(std::vector<LiveRequest>& admitted, std::vector<PendingRequest>& sources) {
  std::vector<model::ForwardChunk> chunks;
  for (const LiveRequest& r : admitted) chunks.push_back(model::ForwardChunk{&r.blocks, r.tokens, r.hit_tokens});
  auto logits_result = model_.forward(shared_, chunks);
  if (!logits_result.ok()) return logits_result.error();
  std::vector<std::vector<float>> logits = std::move(logits_result).value();
  AllocatorBatch commit{next_trace(), {}};
  for (LiveRequest& r : admitted) {
    result_.prefill_rows_computed += r.prompt_tokens - r.hit_tokens;
    result_.prefill_rows_reused += r.hit_tokens;
    result_.prompt_tokens += r.prompt_tokens;
    commit.ops.push_back(CommitRowsOp{r.fence, r.prompt_tokens});
  }
  auto committed_result = call_allocator(commit);
  if (!committed_result.ok()) return committed_result.error();
  AllocatorBatchReceipt committed = std::move(committed_result).value();
  for (size_t i = 0; i < admitted.size(); ++i) {
    LiveRequest& r = admitted[i];
    if (const auto* c = std::get_if<AllocationReceipt>(&committed.outcomes[i])) {
      r.fence.table_version = c->table_version_after;
      r.cached_rows = r.prompt_tokens;
    } else {
      note_error(std::get<Error>(committed.outcomes[i]));
      r.failed = true;
    }
  }

  // The prompt's full blocks are published as soon as their rows are
  // committed (not when the request ends), so a request admitted in the next
  // iteration already finds them: the vLLM habit of caching a block once it
  // is full.
  if (o_.reuse) {
    PrefixBatch publish{next_trace(), {}};
    for (LiveRequest& r : admitted) {
      const uint32_t first = r.hit_tokens / P_, full = r.cached_rows / P_;
      if (!r.failed && full > first)
        publish.ops.push_back(PrefixPublishOp{r.job->namespace_name, r.fence.request,
                                              std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + full * P_),
                                              first, full});
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
      fork.ops.push_back(ForkOp{admitted[i].fence});
      fork_of.emplace_back(i, b);
    }
  }
  std::vector<LiveRequest> children;
  if (!fork.ops.empty()) {
    auto forked_result = call_allocator(fork);
    if (!forked_result.ok()) return forked_result.error();
    AllocatorBatchReceipt forked = std::move(forked_result).value();
    for (size_t k = 0; k < fork_of.size(); ++k) {
      const auto [i, b] = fork_of[k];
      const auto* receipt = std::get_if<AllocationReceipt>(&forked.outcomes[k]);
      if (receipt == nullptr || receipt->outcome != AllocationOutcome::committed) {
        if (receipt == nullptr) note_error(std::get<Error>(forked.outcomes[k]));
        else ++result_.out_of_capacity_retries;
        ++failed_requests_;  // this branch is not served; the run reports it
        continue;
      }
      LiveRequest child = admitted[i];
      child.branch = b;
      child.hit_tokens = 0;  // its prompt rows are shared by the fork, not found by the index
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
  auto appended_result = call_allocator(append);
  if (!appended_result.ok()) return appended_result.error();
  AllocatorBatchReceipt appended = std::move(appended_result).value();
  std::vector<LiveRequest*> writing;
  for (size_t i = 0; i < stepping.size(); ++i) {
    LiveRequest& r = *stepping[i];
    const auto* receipt = std::get_if<AllocationReceipt>(&appended.outcomes[i]);
    if (receipt == nullptr) {
      note_error(std::get<Error>(appended.outcomes[i]));
      r.failed = true;
      continue;
    }
    if (receipt->outcome != AllocationOutcome::committed) {
      ++result_.out_of_capacity_retries;  // retried next iteration
      continue;
    }
    r.fence.generation = receipt->request_generation;
    r.fence.table_version = receipt->table_version_after;
    result_.copy_on_write_rows += receipt->copied_rows;
    KVRT_TRY(apply_entries(r, receipt->published_entries));
    if (receipt->context_tokens_after != r.cached_rows + 1) {
      note_error(make_error(ErrorCode::invariant_violated,
                            "append receipt context " + std::to_string(receipt->context_tokens_after) +
                                " is not cached rows + 1",
                            "context_tokens_after"));
      r.failed = true;
      continue;
    }
    writing.push_back(&r);
  }
  if (writing.empty()) return Status::success();
  std::vector<model::ForwardChunk> chunks;
  for (LiveRequest* r : writing) chunks.push_back(model::ForwardChunk{&r->blocks, r->tokens, r->cached_rows});
  auto logits_result = model_.forward(shared_, chunks);
  if (!logits_result.ok()) return logits_result.error();
  std::vector<std::vector<float>> logits = std::move(logits_result).value();
  AllocatorBatch commit{next_trace(), {}};
  for (size_t i = 0; i < writing.size(); ++i) {
    LiveRequest& r = *writing[i];
    result_.decode_kv_bytes_read += uint64_t{r.cached_rows + 1} * row_bytes_;
    ++result_.decode_rows_computed;
    r.cached_rows += 1;
    r.tokens.push_back(model::greedy_token(logits[i]));
    ++r.generated;
    commit.ops.push_back(CommitRowsOp{r.fence, r.cached_rows});
  }
  auto committed_result = call_allocator(commit);
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

// 5. Finished requests: verified against a no-reuse replay, their full blocks
// published (a later turn or question finds them), released; a chat's next
// turn becomes ready with the conversation so far.
Status EngineLoop::finish() {
  PrefixBatch publish{next_trace(), {}};
  AllocatorBatch release{next_trace(), {}};
  std::vector<LiveRequest> remaining, done;
  for (LiveRequest& r : live_) {
    if (!r.failed && r.generated < r.decode_target) {
      remaining.push_back(std::move(r));
      continue;
    }
    if (!r.failed && o_.verify) verify(r);
    const uint32_t first = std::max(r.published_blocks, r.hit_tokens / P_), full = r.cached_rows / P_;
    if (!r.failed && o_.reuse && full > first)
      publish.ops.push_back(PrefixPublishOp{r.job->namespace_name, r.fence.request,
                                            std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + full * P_),
                                            first, full});
    release.ops.push_back(ReleaseOp{r.fence, r.failed ? ReleaseReason::cancelled : ReleaseReason::finished});
    done.push_back(std::move(r));
  }
  live_ = std::move(remaining);
  if (done.empty()) return Status::success();
  KVRT_TRY(publish_batch(publish));
  auto released_result = call_allocator(release);
  if (!released_result.ok()) return released_result.error();
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
    if (r.job->kind == workload::JobKind::chat && r.turn + 1 < r.job->turns.size())
      ready_.push_back(turn_request(*r.job, r.turn + 1, r.tokens));
  }
  if (o_.on_progress)
    o_.on_progress(EngineProgress{result_.requests, result_.requests_total,
                                  result_.prefill_rows_computed + result_.decode_rows_computed});
  return Status::success();
}

void EngineLoop::verify(const LiveRequest& r) {
  if (replay_cache_ == nullptr) {
    uint32_t longest = 0;
    for (const workload::Job* job : jobs_) {
      uint32_t history = static_cast<uint32_t>(job->prefix.size());
      for (const workload::Turn& t : job->turns) {
        const uint32_t context = history + static_cast<uint32_t>(t.user_tokens.size()) + t.decode_tokens;
        longest = std::max(longest, context);
        if (job->kind == workload::JobKind::chat) history = context;
      }
    }
    Result<std::unique_ptr<model::LocalModelKvCache>> cache =
        model::LocalModelKvCache::create(shared_.layout(), (longest + P_ - 1) / P_ + 1);
    if (!cache.ok()) {
      note_error(cache.error());
      return;
    }
    replay_cache_ = std::move(*cache);
  }
  ReplayedRequest request{&r.blocks, r.tokens, r.prompt_tokens, r.generated, r.branch, r.hit_tokens, r.cached_rows};
  Result<ReplayVerdict> verdict = replay_without_reuse(model_, *replay_cache_, shared_, request);
  if (!verdict.ok()) {
    note_error(verdict.error());
    return;
  }
  ++result_.requests_verified;
  if (!verdict->tokens_equal) ++result_.token_mismatches;
  result_.rows_checked += verdict->rows_checked;
  result_.reused_rows_checked += verdict->reused_rows_checked;
  result_.row_mismatches += verdict->row_mismatches;
  result_.reused_row_mismatches += verdict->reused_row_mismatches;
  if (result_.first_mismatch.empty() && !verdict->first_mismatch.empty())
    result_.first_mismatch = o_.worker_name + " job " + std::to_string(r.job->id) + " turn " +
                             std::to_string(r.turn) + " branch " + std::to_string(r.branch) + ": " +
                             verdict->first_mismatch;
}

}  // namespace

Result<EngineResult> run_engine_worker(const NodeDescriptor& node, const EngineOptions& options) {
  if (options.workload == nullptr || options.workers == 0 || options.worker_index >= options.workers ||
      options.in_flight == 0)
    return make_error(ErrorCode::invalid_argument, "an engine worker needs a workload, 0 <= index < workers and "
                      "in_flight > 0", "engine_options");
  auto layout_result = load_layout_manifest(node.layout_path);
  if (!layout_result.ok()) return layout_result.error();
  CacheLayoutManifest layout = std::move(layout_result).value();
  if (layout.digest() != node.layout_sha256)
    return make_error(ErrorCode::incompatible, "layout file " + node.layout_path + " changed since the node started",
                      "layout_sha256");
  auto model_result = model::ReferenceModel::create(options.model, layout);
  if (!model_result.ok()) return model_result.error();
  model::ReferenceModel model = std::move(model_result).value();
  if (options.workload->vocab != options.model.vocab)
    return make_error(ErrorCode::config_field,
                      "workload vocab " + std::to_string(options.workload->vocab) + " differs from the model's " +
                          std::to_string(options.model.vocab),
                      "workload.vocab");

  ClientOptions client_options;
  client_options.worker_name = options.worker_name;
  client_options.trace = options.trace;
  auto client_result = Client::connect(node, options.token_hex, client_options);
  if (!client_result.ok()) return client_result.error();
  std::unique_ptr<Client> client = std::move(client_result).value();
  const SessionReceipt& session = client->session();
  if (session.layout_sha256 != layout.digest())
    return make_error(ErrorCode::incompatible, "the node serves another layout than " + node.layout_path,
                      "layout_sha256");
  // Attach every pool the session receipt names, with its generation and
  // layout: a replaced pool is refused, never written.
  std::vector<shm::BlockPoolSegment> segments;
  for (const PoolAttachment& p : session.pools) {
    auto s_result = shm::BlockPoolSegment::attach(p.segment_name, p.generation, session.layout_sha256);
    if (!s_result.ok()) return s_result.error();
    shm::BlockPoolSegment s = std::move(s_result).value();
    segments.push_back(std::move(s));
  }
  auto store_result = shm::ShmPayloadStore::create(std::move(segments));
  if (!store_result.ok()) return store_result.error();
  shm::ShmPayloadStore store = std::move(store_result).value();
  auto cache_result = shm::ShmModelKvCache::create(store, layout);
  if (!cache_result.ok()) return cache_result.error();
  std::unique_ptr<shm::ShmModelKvCache> cache = std::move(cache_result).value();
  EngineLoop loop(*client, model, *cache, options,
                  workload::jobs_for_worker(*options.workload, options.worker_index, options.workers));
  auto result_result = loop.run();
  if (!result_result.ok()) return result_result.error();
  EngineResult result = std::move(result_result).value();
  result.funnel = loop.funnel().counts();
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    result.rejections[b] = loop.funnel().rejections(static_cast<ReuseBucket>(b));
  return result;
}

}  // namespace kvrt
