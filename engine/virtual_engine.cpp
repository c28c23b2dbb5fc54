// The engine loop over virtual reservations (vAttention, 0x06). See
// virtual_engine.hpp.
//
// One iteration:
//   1. step: every active request's frontier to the rows the next forward
//      writes (a prefill: its prompt; a decode: one more row) and one row
//      beyond                      -> one mapper message; the pages this
//      forward needs mapped into this worker's view now (map before use,
//      0x06D), the ones beyond on a background thread
//   2. one batched forward over the slots' contiguous ranges
//   3. [appends of that forward, frees of the requests finished last time,
//      slot bindings of new requests] -> one mapper message; then a step of
//      the new requests to their prompts -> one more; their pages (kept
//      from a previous owner, and new) mapped on a background thread while
//      With reuse, the new requests are then admitted through the node's
//      executable-reuse transaction (one reuse message, one allocation in
//      the block pools): step 7 reads each slot's frontier, which the step
//      just published.
//   4. finished requests are verified against a private replay, then freed
//      with their pages retained (0x06E); a chat's next turn queued.
// So a new request's pages are mapped ahead, behind the verification's
// compute, and the next step finds them in place. A hit's rows are copied
// from the pools into the slot once its pages are in the view (before its
// prefill); after the prefill the computed prompt rows are copied into the
// request's blocks, committed, published, and the blocks released at the
// next admission (the prompt tier holds what the index names; the slot
// holds the request).
#include "engine/virtual_engine.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "engine/engine_replay.hpp"
#include "engine/first_block_seeds.hpp"
#include "engine/model/model_kv_cache.hpp"
#include "engine/owner_call_timing.hpp"
#include "engine/pending_request.hpp"
#include "engine/private_generation.hpp"
#include "engine/table_entries.hpp"

namespace kvrt::engine {
namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// A request waiting for a slot: a chat turn with its history, a question,
// or one branch of a fork (no sharing here: each branch prefills the prompt).
struct QueuedRequest {
  PendingRequest p;
  uint32_t branch = 0;  // the first token's rank
};

struct SlotRequest {
  QueuedRequest q;
  RequestId id;
  SlotGeneration generation;
  uint32_t slot = 0;
  model::SequenceBlocks blocks;
  std::vector<TokenId> tokens;  // prompt, then generated
  uint32_t cached_rows = 0;     // rows written and appended [rows]
  uint32_t generated = 0;       // [tokens]
  // The prompt tier (with reuse): the request's allocation in the node's
  // block pools (the hit's blocks, then its own) until its prompt rows are
  // published there, the rows the hit served, and the reuse attempt to end
  // once the prefill read them.
  std::optional<RequestFence> fence;
  model::SequenceBlocks pool_blocks;
  uint32_t hit_tokens = 0;  // [rows]
  std::optional<ExecutionSnapshotVersion> reuse_snapshot;
  NamespaceGeneration tier_generation{0};  // the grant it was admitted under
  bool finished() const { return generated >= q.p.decode_tokens; }
};

class VirtualEngine {
 public:
  VirtualEngine(EngineSession& session, MapperPoolView& view, VirtualModelKvCache& cache, model::ModelKvCache* pools,
                const model::ReferenceModel& model, const EngineOptions& o, std::vector<const workload::Job*> jobs)
      : session_(session),
        view_(view),
        cache_(cache),
        pools_(o.reuse ? pools : nullptr),
        model_(model),
        o_(o),
        jobs_(std::move(jobs)) {
    result_.worker = o.worker_name;
    observe_owner_calls(session_, result_);
    for (const workload::Job* job : jobs_) enqueue_job(*job);
    result_.requests_total = ready_.size();
    for (const workload::Job* job : jobs_)
      if (job->kind == workload::JobKind::chat && !job->turns.empty()) result_.requests_total += job->turns.size() - 1;
  }

  Result<EngineResult> run() {
    const Clock::time_point start = Clock::now();
    // A lost session (the node died or ended it) sends the rest of the share
    // down the private path; any other error ends the run.
    const auto lost = [this](const Error& e) {
      return o_.serve_privately_on_loss && (e.code == ErrorCode::node_lost || e.code == ErrorCode::session_ended);
    };
    const auto iteration = [this]() -> Status {
      if (pools_ != nullptr && !authorized_) {
        KVRT_TRY(authorize_namespaces());
        authorized_ = true;
      }
      KVRT_TRY(step_and_forward());
      KVRT_TRY(bind_and_settle());
      return finish();
    };
    Clock::time_point progress_at = start;
    while (!ready_.empty() || !live_.empty() || !queued_.empty()) {
      const uint64_t before = result_.requests + result_.prefill_rows_computed + result_.decode_rows_computed;
      if (Status s = iteration(); !s.ok()) {
        if (!lost(s.error())) return s.error();
        KVRT_TRY(serve_rest_privately(s.error()));
        break;
      }
      if (result_.requests + result_.prefill_rows_computed + result_.decode_rows_computed != before) {
        progress_at = Clock::now();
      } else if (Clock::now() - progress_at > std::chrono::seconds(30)) {
        return make_error(ErrorCode::run_stalled,
                          o_.worker_name + " made no progress for 30 s: the mapper could not back its requests (" +
                              std::to_string(result_.virtual_steps_infeasible) + " steps short of page handles)",
                          "handle_count");
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    if (result_.sessions_lost == 0) {
      KVRT_TRY(await_ahead());
      KVRT_TRY(release_tier());
    }
    result_.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    result_.funnel = funnel_.counts();
    for (size_t b = 0; b < kReuseBucketCount; ++b)
      result_.rejections[b] = funnel_.rejections(static_cast<ReuseBucket>(b));
    return result_;
  }

 private:
  void enqueue_job(const workload::Job& job) {
    switch (job.kind) {
      case workload::JobKind::chat:
        if (!job.turns.empty()) ready_.push_back({turn_request(job, 0, job.prefix)});
        break;
      case workload::JobKind::fork:
        for (uint32_t b = 0; b < std::max<uint32_t>(1, job.branches); ++b)
          ready_.push_back({turn_request(job, 0, job.prefix), b});
        break;
      case workload::JobKind::few_shot:
      case workload::JobKind::long_document:
        for (uint32_t t = 0; t < job.turns.size(); ++t) ready_.push_back({turn_request(job, t, job.prefix)});
        break;
      case workload::JobKind::templated:
        // Refused before the run starts (run_driver.cpp): the paged loop serves them.
        break;
    }
  }

  TraceContext next_trace() { return TraceContext{(uint64_t(o_.worker_index + 1) << 40) ^ ++span_, span_, 0}; }

  void note_error(const Error& e) {
    // An owner's fault point ended the op (a fault-injection run): the owner
    // undid it and the request goes on without it (no reuse, no publication).
    if (e.code == ErrorCode::fault_injected) {
      ++result_.faults_absorbed;
      return;
    }
    // A weights invalidation or a purge of a namespace (0x01A, 0x0CE): the
    // grant the prompt tier was authorized under is no longer current. This
    // loop keeps its own weights, so it stops reusing and publishing and
    // serves the rest of its share without the tier: exact, never stale.
    if (e.code == ErrorCode::authorization_stale_generation) {
      ++result_.stale_generation_refusals;
      reusable_.clear();
      return;
    }
    if (e.code == ErrorCode::authorization_namespace_closed) {
      ++result_.namespace_closed_refusals;
      reusable_.clear();
      return;
    }
    if (e.code == ErrorCode::reuse_receipt_revoked) {
      ++result_.receipts_revoked;
      return;
    }
    ++result_.operation_errors;
    if (result_.first_error.empty()) result_.first_error = e.describe();
  }

  // Sends `ops`, checks the receipt answers them one for one, and times it.
  Result<MapperBatchReceipt> call(std::vector<MapperOp> ops, bool step) {
    const Clock::time_point t0 = Clock::now();
    Result<MapperBatchReceipt> receipt = session_.mapper(MapperBatch{next_trace(), std::move(ops)});
    (step ? result_.mapper_step_us : result_.mapper_us).push_back(micros_since(t0));
    return receipt;
  }

  // 3. The appends and frees queued so far, a slot for each request that
  // fits in flight, and those slots stepped to their prompts ahead of their
  // first forward, mapped in the background.
  Status bind_and_settle() {
    std::vector<MapperOp> ops = std::move(queued_);
    queued_.clear();
    const size_t settled = ops.size();
    std::vector<QueuedRequest> binding;
    std::vector<ViewPage> ahead;  // pages of the new slots, mapped in the background
    const size_t first_new = live_.size();
    std::vector<QueuedRequest> deferred;
    while (!admission_held_ && !ready_.empty() && live_.size() + binding.size() < o_.in_flight) {
      QueuedRequest q = std::move(ready_.front());
      ready_.pop_front();
      if (defers(q.p)) {
        deferred.push_back(std::move(q));
        continue;
      }
      binding.push_back(std::move(q));
      const PendingRequest& p = binding.back().p;
      ops.emplace_back(std::in_place_type<MapperAllocOp>, RequestId{next_request_++}, RequestGeneration{1},
                       static_cast<uint32_t>(p.prompt.size() + p.decode_tokens));
    }
    for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) ready_.push_front(std::move(*it));
    seeds_.end_round();
    if (ops.empty()) return release_tier();
    Result<MapperBatchReceipt> answered = call(ops, false);
    if (!answered.ok()) {
      // Back in line, first: a lost session serves them privately.
      for (auto it = binding.rbegin(); it != binding.rend(); ++it) ready_.push_front(std::move(*it));
      return answered.error();
    }
    const MapperBatchReceipt& receipt = *answered;
    for (size_t i = 0; i < settled; ++i)
      if (const auto* e = std::get_if<Error>(&receipt.outcomes[i]); e != nullptr && !os_refusal_absorbed(*e))
        note_error(*e);
    for (size_t k = 0; k < binding.size(); ++k) {
      const MapperOutcome& out = receipt.outcomes[settled + k];
      const auto& alloc = std::get<MapperAllocOp>(ops[settled + k]);
      if (const auto* e = std::get_if<Error>(&out)) {
        // No inactive slot fits (other workers hold them): back in line.
        if (e->code != ErrorCode::slots_exhausted) note_error(*e);
        ready_.push_front(std::move(binding[k]));
        continue;
      }
      const auto* bound = std::get_if<SlotBinding>(&out);
      if (bound == nullptr) return make_error(ErrorCode::invariant_violated, "alloc answered without a slot", "slot");
      for (const PageMapping& m : bound->retained_mappings) add_page(bound->slot.value, m, &ahead);
      if (bound->retained_mapping_reused) {
        ++result_.virtual_retained_slot_reuses;
        result_.virtual_retained_pages_reused += bound->retained_pages;
      }
      SlotRequest r;
      r.tokens = binding[k].p.prompt;
      r.q = std::move(binding[k]);
      r.id = alloc.request;
      r.generation = bound->generation;
      r.slot = bound->slot.value;
      r.blocks = cache_.blocks_of(r.slot);
      live_.push_back(std::move(r));
    }
    if (live_.size() > first_new) {
      MapperStepOp step;
      for (size_t i = first_new; i < live_.size(); ++i)
        step.requests.push_back(StepRequest{live_[i].id, target_of(live_[i])});
      MapperBatchReceipt stepped;
      KVRT_TRY_ASSIGN(stepped, call({step}, true));
      // Undone by the OS, or short of handles: nothing mapped, and the next
      // step maps what it can, synchronously. The retained pages of the new
      // bindings (in `ahead`) are mapped into the view below either way, and
      // the admission goes on: step 7 then sees the frontier lag (0x0CF).
      if (const auto* e = std::get_if<Error>(&stepped.outcomes[0])) {
        if (!os_refusal_absorbed(*e)) return *e;
      } else {
        const StepResult& result = std::get<StepResult>(stepped.outcomes[0]);
        ++result_.virtual_steps;
        if (result.feasibility == MappingFeasibility::ready) {
          KVRT_TRY(count_receipts(result));
          for (const MappedFrontierReceipt& f : result.receipts) append_pages(f, UINT32_MAX, &ahead, &ahead);
        } else {
          ++result_.virtual_steps_infeasible;
        }
      }
      // After the step: the frontier the node's step 7 reads is published.
      if (pools_ != nullptr) KVRT_TRY(admit_to_tier(first_new));
    }
    KVRT_TRY(await_ahead());
    map_in_background(std::move(ahead));
    return release_tier();
  }

  // Cache-aware admission (first_block_seeds.hpp), in the namespaces whose
  // prompts go through the prompt tier; elsewhere nothing waits.
  bool defers(const PendingRequest& p) {
    return pools_ != nullptr && reusable_.contains(p.job->namespace_name) &&
           seeds_.defers(p.job->namespace_name, p.prompt, pools_->layout().allocator_block_size);
  }

  // The namespaces this run's rows may be reused in and published into:
  // those whose grant computes with the base weights this engine runs
  // (the layout's model generation, no adapter). Rows of other weights
  // differ (0x01A), so another namespace's requests compute every row.
  Status authorize_namespaces() {
    std::set<std::string> names;
    for (const workload::Job* job : jobs_) names.insert(job->namespace_name);
    for (const std::string& ns : names) {
      Result<NamespaceGrantReceipt> grant = session_.authorize(ns, next_trace());
      if (!grant.ok()) {
        // Closed by a purge in progress: served without the prompt tier.
        if (grant.error().code != ErrorCode::authorization_namespace_closed) return grant.error();
        continue;
      }
      if (grant->model_generation == cache_.layout().model_generation && grant->adapter_identity.empty())
        reusable_[ns] = grant->generation;
    }
    return Status::success();
  }

  // The new requests live_[first_new..] (their slots bound and stepped over
  // their prompts) admitted through the executable-reuse transaction: one
  // reuse message naming each slot (step 7 reads its frontier) and one
  // allocation of each prompt in the block pools with its hit's blocks. A
  // prompt the pools refuse is served from its slot alone.
  Status admit_to_tier(size_t first_new) {
    std::vector<AdmissionRequest> asks;
    std::vector<size_t> asked;  // live_ index of asks[k]
    for (size_t i = first_new; i < live_.size(); ++i) {
      const std::string& ns = live_[i].q.p.job->namespace_name;
      const auto grant = reusable_.find(ns);
      if (grant == reusable_.end()) continue;
      live_[i].tier_generation = grant->second;
      asks.push_back(
          AdmissionRequest{ns, live_[i].tokens, RequestIdentity{}, LogitsPath::logits_required, live_[i].id});
      asked.push_back(i);
    }
    if (asks.empty()) return Status::success();
    const TraceContext reuse_trace = next_trace();
    auto answered = session_.admit(asks, true, reuse_trace, next_trace());
    take_end_notes();
    if (!answered.ok()) return answered.error();
    for (size_t k = 0; k < asked.size(); ++k) {
      const Admission& a = (*answered)[k];
      SlotRequest& r = live_[asked[k]];
      if (a.reuse_error) note_error(*a.reuse_error);
      if (!a.admitted()) {
        // No room in the pools, the namespace's quota, or a hit a purge
        // withdrew: nothing was taken; the slot serves the request alone.
        if (a.allocation_error && !a.hit_withdrawn()) note_error(*a.allocation_error);
        ++result_.virtual_tier_refusals;
        continue;
      }
      if (a.hit) {
        if (a.hit->namespace_generation != r.tier_generation)
          note_error(make_error(ErrorCode::invariant_violated,
                                "a reuse receipt of generation " + std::to_string(a.hit->namespace_generation.value) +
                                    " answered a request admitted under another",
                                "namespace_generation"));
        funnel_.record(FunnelOutcome::hit());
      } else if (a.rejection) {
        funnel_.record(FunnelOutcome::rejected(a.rejection->reason));
      }
      r.fence = a.fence();
      r.hit_tokens = a.hit_tokens();
      r.reuse_snapshot = a.reuse_attempt();
      KVRT_TRY(apply_table_entries(pools_->layout(), a.allocation->published_entries, r.pool_blocks));
    }
    return Status::success();
  }

  // The prompt rows that `prefilled` computed in their slots, copied into
  // their blocks in the pools, committed and published: the blocks past a
  // hit's as that attempt's successor (0x0CD step 10, sent with the next
  // reuse message), the others through the prefix owner now. Their blocks
  // go back at the next release_tier(); what the index names stays cached.
  Status publish_prompts(const std::vector<SlotRequest*>& prefilled) {
    if (prefilled.empty()) return Status::success();
    const uint32_t P = pools_->layout().allocator_block_size;
    AllocatorBatch commit{next_trace(), {}};
    for (SlotRequest* r : prefilled) {
      const auto prompt = static_cast<uint32_t>(r->q.p.prompt.size());
      KVRT_TRY(model::copy_kv_rows(cache_, r->blocks, *pools_, r->pool_blocks, r->hit_tokens, prompt));
      commit.ops.push_back(CommitRowsOp{*r->fence, prompt});
    }
    AllocatorBatchReceipt committed;
    KVRT_TRY_ASSIGN(committed, session_.allocator(commit));
    PrefixBatch publish{next_trace(), {}};
    for (size_t i = 0; i < prefilled.size(); ++i) {
      SlotRequest& r = *prefilled[i];
      RequestFence fence = *r.fence;
      const auto* c = std::get_if<AllocationReceipt>(&committed.outcomes.at(i));
      if (c != nullptr)
        fence.table_version = c->table_version_after;
      else
        note_error(std::get<Error>(committed.outcomes[i]));
      const uint32_t first = r.hit_tokens / P, full = static_cast<uint32_t>(r.q.p.prompt.size()) / P;
      const bool publishes = c != nullptr && full > first;
      std::vector<TokenId> tokens(r.tokens.begin(), r.tokens.begin() + full * P);
      if (r.reuse_snapshot) {
        std::optional<ReuseSuccessor> successor;
        if (publishes) successor = ReuseSuccessor{fence.request, std::move(tokens), full};
        session_.end_reuse(*r.reuse_snapshot, true, std::move(successor));
        r.reuse_snapshot.reset();
      } else if (publishes && reusable_.contains(r.q.p.job->namespace_name)) {
        // (A grant that went stale since admission publishes nothing.)
        publish.ops.push_back(PrefixPublishOp{r.q.p.job->namespace_name, fence.request, std::move(tokens), first, full,
                                              RequestIdentity{}, r.tier_generation});
      }
      tier_held_.emplace_back(fence, ReleaseReason::finished);
      r.fence.reset();
    }
    if (publish.ops.empty()) return Status::success();
    PrefixBatchReceipt published;
    KVRT_TRY_ASSIGN(published, session_.prefix(publish));
    for (const PrefixOutcome& o : published.outcomes)
      if (const auto* e = std::get_if<Error>(&o)) note_error(*e);
    return Status::success();
  }

  // The ends of reuse attempts not yet sent (their successors published
  // while the requests still hold the blocks), then the blocks of the
  // prompts published since the last call, released.
  Status release_tier() {
    if (pools_ == nullptr) return Status::success();
    if (session_.reuse_ends_pending()) {
      KVRT_TRY(session_.flush_reuse_ends(next_trace()));
      take_end_notes();
    }
    if (tier_held_.empty()) return Status::success();
    AllocatorBatch release{next_trace(), {}};
    for (const auto& [fence, reason] : tier_held_)
      release.ops.emplace_back(std::in_place_type<ReleaseOp>, fence, reason);
    tier_held_.clear();
    AllocatorBatchReceipt released;
    KVRT_TRY_ASSIGN(released, session_.allocator(release));
    for (const AllocatorOutcome& o : released.outcomes)
      if (const auto* e = std::get_if<Error>(&o)) note_error(*e);
    return Status::success();
  }

  void take_end_notes() {
    for (const Error& e : session_.take_reuse_end_notes().errors) note_error(e);
  }

  // Workers that wait on each other's pages should not all give up at the
  // same step: each waits a number of steps of its own.
  uint32_t preempt_after_steps() const { return 8 * (1 + o_.worker_index % 4); }

  // Recompute preemption (as engines do under memory pressure): the most
  // recently bound request gives its slot back with its pages unmapped, so
  // the handles return to the pool (0x06E's unmap_now), and is served again
  // from its prompt, first in line. Admission waits until a request finishes.
  void preempt_one() {
    stalled_steps_ = 0;
    if (live_.size() < 2) return;  // a lone request that cannot fit is the stall check's to report
    SlotRequest& victim = live_.back();
    queued_.emplace_back(std::in_place_type<MapperFreeOp>, victim.id, victim.generation, ReleaseMode::unmap_now);
    // Preempted before its prefill: its reuse attempt ends unexecuted and its
    // blocks in the pools go back with the next release.
    if (victim.reuse_snapshot) session_.end_reuse(*victim.reuse_snapshot, false, std::nullopt);
    if (victim.fence) tier_held_.emplace_back(*victim.fence, ReleaseReason::preempted);
    ready_.push_front(std::move(victim.q));
    live_.pop_back();
    admission_held_ = true;
    ++result_.requests_preempted;
  }

  // The frontier a step asks for: the rows the next forward writes and,
  // for a request that decodes again, one more (0x06D's one iteration ahead).
  uint32_t target_of(const SlotRequest& r) const {
    const uint32_t now = static_cast<uint32_t>(r.tokens.size());
    const uint32_t last = static_cast<uint32_t>(r.q.p.prompt.size() + r.q.p.decode_tokens) - 1;  // rows ever written
    return std::min({now + 1, std::max(now, last), view_.geometry().config().max_tokens});
  }

  // A receipt's new pages as view pages: below `needed` pages of its slot
  // into `now`, the rest into `ahead`.
  void append_pages(const MappedFrontierReceipt& f, uint32_t needed, std::vector<ViewPage>* now,
                    std::vector<ViewPage>* ahead) {
    for (const PageMapping& m : f.new_mappings) add_page(f.request_slot.value, m, m.page_index < needed ? now : ahead);
  }

  // One page of `slot` as a view page, unless this view already shows that
  // handle there (a slot this worker had before, retained with its pages).
  void add_page(uint32_t slot, const PageMapping& m, std::vector<ViewPage>* out) {
    const MapperGeometry& geo = view_.geometry();
    const uint64_t g = geo.config().page_group_bytes;
    const auto page =
        static_cast<uint32_t>(geo.page_offset(geo.tensor_index(m.local_layer, m.tensor), slot, m.page_index) / g);
    if (shown_.empty()) shown_.assign(geo.virtual_reserved_bytes() / g, UINT64_MAX);
    if (shown_[page] == m.handle.value) return;
    shown_[page] = m.handle.value;
    out->push_back(ViewPage{page, m.handle.value});
  }

  // The step's receipts into the result: pages, reclamations, ledgers.
  Status count_receipts(const StepResult& stepped) {
    for (const MappedFrontierReceipt& f : stepped.receipts) {
      if (!f.ready_before_use)
        return make_error(ErrorCode::invariant_violated, "a synchronous frontier was published before its pages",
                          "ready_before_use");
      result_.virtual_pages_mapped += f.new_mappings.size();
      result_.virtual_bundles_reclaimed += f.reclaimed_bundles.size();
      if (f.ledger.mapped_bytes >= result_.virtual_mapped_peak_bytes) {
        result_.virtual_mapped_peak_bytes = f.ledger.mapped_bytes;
        result_.virtual_active_valid_at_peak_bytes = f.ledger.active_valid_bytes;
      }
      result_.virtual_reserved_bytes = f.ledger.virtual_reserved_bytes;
      result_.virtual_pool_bytes = f.ledger.physical_pool_bytes;
    }
    return Status::success();
  }

  void map_in_background(std::vector<ViewPage> pages) {
    if (pages.empty()) return;
    result_.virtual_pages_mapped_ahead += pages.size();
    ahead_ = std::async(std::launch::async, [this, pages = std::move(pages)]() -> Result<double> {
      const Clock::time_point b0 = Clock::now();
      KVRT_TRY(view_.map(pages));
      return micros_since(b0);
    });
  }

  // 2-3. Map before use, then one forward over every live request.
  Status step_and_forward() {
    if (live_.empty()) return Status::success();
    // Map ahead (0x06D): each frontier is stepped one row past what this
    // forward writes (the row the next decode step writes), so the page a
    // decode crosses into is mapped one iteration early, in this worker's
    // view on a background thread while the forward runs.
    MapperStepOp step;
    for (const SlotRequest& r : live_) step.requests.push_back(StepRequest{r.id, target_of(r)});
    MapperBatchReceipt receipt;
    KVRT_TRY_ASSIGN(receipt, call({step}, true));
    if (const auto* e = std::get_if<Error>(&receipt.outcomes[0])) {
      if (!os_refusal_absorbed(*e)) return *e;
      return Status::success();  // nothing mapped, nothing forwarded: the next iteration steps again
    }
    const StepResult& stepped = std::get<StepResult>(receipt.outcomes[0]);
    ++result_.virtual_steps;
    if (stepped.feasibility != MappingFeasibility::ready) {
      // Not enough page handles now: nothing is mapped, the step is retried
      // once finished requests release theirs (0x06D: a feasibility result;
      // whom to delay is the engine's call). Requests of every worker may
      // hold the pages the others wait for, so a wait that lasts preempts.
      ++result_.virtual_steps_infeasible;
      if (++stalled_steps_ >= preempt_after_steps()) preempt_one();
      return Status::success();
    }
    stalled_steps_ = 0;
    KVRT_TRY(count_receipts(stepped));
    // The pages this forward writes or reads must be in the view now; the
    // ones ahead may follow in the background. The previous background
    // batch ends first: map calls never overlap.
    KVRT_TRY(await_ahead());
    const Clock::time_point t0 = Clock::now();
    const MapperGeometry& geo = view_.geometry();
    std::vector<ViewPage> now, ahead;
    for (const MappedFrontierReceipt& f : stepped.receipts) {
      const auto it = std::find_if(live_.begin(), live_.end(),
                                   [&](const SlotRequest& r) { return r.slot == f.request_slot.value; });
      append_pages(f, it == live_.end() ? UINT32_MAX : geo.pages_for_tokens(static_cast<uint32_t>(it->tokens.size())),
                   &now, &ahead);
    }
    KVRT_TRY(view_.map(now));
    result_.view_map_us.push_back(micros_since(t0));
    map_in_background(std::move(ahead));
    // A hit's rows, read in the pools (the request's blocks hold them), land
    // in its slot before the prefill reads them: the node's step 7 saw the
    // slot's frontier cover them, and this view maps those pages now.
    for (SlotRequest& r : live_) {
      if (r.generated != 0 || r.cached_rows >= r.hit_tokens) continue;
      KVRT_TRY(model::copy_kv_rows(*pools_, r.pool_blocks, cache_, r.blocks, 0, r.hit_tokens));
      r.cached_rows = r.hit_tokens;
      result_.prefill_rows_reused += r.hit_tokens;
    }

    std::vector<model::ForwardChunk> chunks;
    for (const SlotRequest& r : live_) chunks.push_back(model::ForwardChunk{&r.blocks, r.tokens, r.cached_rows});
    std::vector<std::vector<float>> logits;
    KVRT_TRY_ASSIGN(logits, model_.forward(cache_, chunks));
    std::vector<SlotRequest*> prefilled;  // prompts computed now, for the prompt tier
    for (size_t i = 0; i < live_.size(); ++i) {
      SlotRequest& r = live_[i];
      if (r.generated == 0 && r.fence) prefilled.push_back(&r);
      const uint32_t rows = static_cast<uint32_t>(r.tokens.size()) - r.cached_rows;
      (r.generated == 0 ? result_.prefill_rows_computed : result_.decode_rows_computed) += rows;
      result_.decode_kv_bytes_read +=
          r.generated == 0 ? 0 : uint64_t{r.cached_rows + 1} * cache_.layout().cache_groups[0].row_bytes();
      r.tokens.push_back(r.generated == 0 ? model::ranked_tokens(logits[i], r.q.branch + 1).at(r.q.branch)
                                          : model::greedy_token(logits[i]));
      ++r.generated;
      r.cached_rows = static_cast<uint32_t>(r.tokens.size()) - 1;
      queued_.emplace_back(std::in_place_type<MapperAppendOp>, r.id, r.generation, r.cached_rows);
    }
    return publish_prompts(prefilled);
  }

  // An op the OS refused part-way (os_mapping_failed: an armed mapper.os_map
  // or os_unmap fault point, or the kernel out of memory). A step: the node
  // undid all of it, nothing is mapped, and it is taken again later. A free
  // with unmap_now: the slot was freed and its pages left mapped stay
  // retained (0x06E). Either way nothing of this worker's is lost.
  bool os_refusal_absorbed(const Error& e) {
    if (e.code != ErrorCode::os_mapping_failed) return false;
    ++result_.faults_absorbed;
    return true;
  }

  // The background mapping of the last step's pages ahead, awaited: its
  // time counts as work, the wait (wherever the engine waits) as visible.
  Status await_ahead() {
    if (!ahead_.valid()) return Status::success();
    const Clock::time_point t0 = Clock::now();
    Result<double> busy = ahead_.get();
    result_.view_map_wait_us_total += micros_since(t0);
    if (!busy.ok()) return busy.error();
    result_.view_map_ahead_us_total += *busy;
    return Status::success();
  }

  // 4. Finished requests: verified while their rows are still theirs, then freed.
  Status finish() {
    std::vector<SlotRequest> remaining;
    for (SlotRequest& r : live_) {
      if (!r.finished()) {
        remaining.push_back(std::move(r));
        continue;
      }
      if (o_.verify) KVRT_TRY(verify(r));
      queued_.emplace_back(std::in_place_type<MapperFreeOp>, r.id, r.generation, ReleaseMode::retain);
      admission_held_ = false;  // a slot and its pages come back
      ++result_.requests;
      result_.prompt_tokens += r.q.p.prompt.size();
      result_.decode_tokens += r.generated;
      const workload::Job& job = *r.q.p.job;
      if (job.kind == workload::JobKind::chat && r.q.p.turn + 1 < job.turns.size())
        ready_.push_back({turn_request(job, r.q.p.turn + 1, r.tokens)});
    }
    live_ = std::move(remaining);
    if (o_.on_progress)
      o_.on_progress(EngineProgress{result_.requests, result_.requests_total,
                                    result_.prefill_rows_computed + result_.decode_rows_computed});
    return Status::success();
  }

  // The private path (as the paged loop's, engine_private.cpp): nothing the
  // lost node issued is usable (slots, pages, receipts, leases), so every
  // request of the share that did not finish is served here, prefilled from
  // row 0 in the worker's own cache with no reuse, which is the generation
  // the exactness replay computes. Requests the node had started are
  // checked: the tokens they decoded through it must be the private ones.
  // No reconnection: the rest of the share stays private.
  Status serve_rest_privately(const Error& why) {
    note_session_lost(why, o_, result_);
    if (ahead_.valid()) (void)ahead_.get();  // the view's background batch, whatever it answers
    KVRT_TRY(ensure_replay_cache());
    std::deque<QueuedRequest> rest;
    for (SlotRequest& r : live_) {
      if (r.generated > 0)
        KVRT_TRY(check_decoded_through_lost_node(
            model_, *replay_cache_, r.tokens, static_cast<uint32_t>(r.q.p.prompt.size()), r.q.branch,
            "job " + std::to_string(r.q.p.job->id) + " turn " + std::to_string(r.q.p.turn), o_, result_));
      rest.push_back(std::move(r.q));
    }
    for (QueuedRequest& q : ready_) rest.push_back(std::move(q));
    live_.clear();
    ready_.clear();
    queued_.clear();
    tier_held_.clear();
    session_.abandon_reuse_ends();
    while (!rest.empty()) {
      const QueuedRequest q = std::move(rest.front());
      rest.pop_front();
      std::vector<TokenId> tokens;
      KVRT_TRY_ASSIGN(tokens,
                      serve_privately(model_, *replay_cache_, q.p.prompt, q.branch, q.p.decode_tokens, o_, result_));
      const workload::Job& job = *q.p.job;
      if (job.kind == workload::JobKind::chat && q.p.turn + 1 < job.turns.size())
        rest.push_back({turn_request(job, q.p.turn + 1, tokens)});
    }
    return Status::success();
  }

  // Every request fits its slot's T_max rows, so one slot's blocks hold any
  // replay (and any private generation).
  Status ensure_replay_cache() {
    if (replay_cache_ == nullptr)
      KVRT_TRY_ASSIGN(replay_cache_, model::LocalModelKvCache::create(cache_.layout(), cache_.blocks_per_slot()));
    return Status::success();
  }

  Status verify(const SlotRequest& r) {
    KVRT_TRY(ensure_replay_cache());
    // Nothing shared: every row is compared bitwise, the hit's counted apart.
    const ReplayedRequest request{&r.blocks,     r.tokens,     static_cast<uint32_t>(r.q.p.prompt.size()),
                                  r.generated,   r.q.branch,   r.hit_tokens,
                                  r.cached_rows, r.cached_rows};
    ReplayVerdict v;
    KVRT_TRY_ASSIGN(v, replay_without_reuse(model_, *replay_cache_, cache_, request));
    add_verdict(result_, v,
                o_.worker_name + " job " + std::to_string(r.q.p.job->id) + " turn " + std::to_string(r.q.p.turn) +
                    " branch " + std::to_string(r.q.branch) + " (slot " + std::to_string(r.slot) + ")");
    return Status::success();
  }

  EngineSession& session_;
  MapperPoolView& view_;
  VirtualModelKvCache& cache_;
  model::ModelKvCache* pools_;  // the node's block pools, the prompt tier; null: no reuse
  const model::ReferenceModel& model_;
  const EngineOptions& o_;
  std::vector<const workload::Job*> jobs_;
  std::deque<QueuedRequest> ready_;
  std::vector<SlotRequest> live_;
  std::vector<MapperOp> queued_;  // appends and frees for the next mapper message
  std::unique_ptr<model::LocalModelKvCache> replay_cache_;
  std::future<Result<double>> ahead_;  // the view's mapping of pages ahead [us busy]
  // The handle this view shows at each virtual page, as far as this worker
  // mapped it (UINT64_MAX: not by this worker). A failed map ends the run,
  // so an entry is never ahead of the view.
  std::vector<uint64_t> shown_;
  // The prompt tier: namespaces whose rows this run may reuse and publish
  // (their generation), first blocks of requests already bound, the
  // allocations to release next, and one funnel record per admitted attempt.
  std::map<std::string, NamespaceGeneration> reusable_;
  FirstBlockSeeds seeds_;
  std::vector<std::pair<RequestFence, ReleaseReason>> tier_held_;
  ReuseFunnel funnel_;
  uint32_t stalled_steps_ = 0;   // infeasible steps in a row
  bool admission_held_ = false;  // a preemption holds admission until a request finishes
  bool authorized_ = false;      // the prompt tier's namespaces were authorized
  EngineResult result_;
  // Request ids are the node's mapper's keys across every session: each
  // worker draws from its own range.
  uint64_t next_request_ = (uint64_t(o_.worker_index) + 1) << 40;
  uint64_t span_ = 0;
};

}  // namespace

Result<EngineResult> run_virtual_engine(EngineSession& session, MapperPoolView& view, VirtualModelKvCache& cache,
                                        model::ModelKvCache* pools, const model::ReferenceModel& model,
                                        const EngineOptions& options, std::vector<const workload::Job*> jobs) {
  return VirtualEngine(session, view, cache, pools, model, options, std::move(jobs)).run();
}

}  // namespace kvrt::engine
