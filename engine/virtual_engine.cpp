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
//   4. finished requests are verified against a private replay, then freed
//      with their pages retained (0x06E); a chat's next turn queued.
// So a new request's pages are mapped ahead, behind the verification's
// compute, and the next step finds them in place.
#include "engine/virtual_engine.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <thread>

#include "engine/engine_replay.hpp"
#include "engine/model/model_kv_cache.hpp"
#include "engine/pending_request.hpp"

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
  bool finished() const { return generated >= q.p.decode_tokens; }
};

class VirtualEngine {
 public:
  VirtualEngine(EngineSession& session, MapperPoolView& view, VirtualModelKvCache& cache,
                const model::ReferenceModel& model, const EngineOptions& o, std::vector<const workload::Job*> jobs)
      : session_(session), view_(view), cache_(cache), model_(model), o_(o), jobs_(std::move(jobs)) {
    result_.worker = o.worker_name;
    for (const workload::Job* job : jobs_) enqueue_job(*job);
    result_.requests_total = ready_.size();
    for (const workload::Job* job : jobs_)
      if (job->kind == workload::JobKind::chat && !job->turns.empty()) result_.requests_total += job->turns.size() - 1;
  }

  Result<EngineResult> run() {
    const Clock::time_point start = Clock::now();
    Clock::time_point progress_at = start;
    while (!ready_.empty() || !live_.empty() || !queued_.empty()) {
      const uint64_t before = result_.requests + result_.prefill_rows_computed + result_.decode_rows_computed;
      KVRT_TRY(step_and_forward());
      KVRT_TRY(bind_and_settle());
      KVRT_TRY(finish());
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
    KVRT_TRY(await_ahead());
    result_.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
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
    }
  }

  TraceContext next_trace() { return TraceContext{(uint64_t(o_.worker_index + 1) << 40) ^ ++span_, span_, 0}; }

  void note_error(const Error& e) {
    ++result_.operation_errors;
    if (result_.first_error.empty()) result_.first_error = e.describe();
  }

  // Sends `ops`, checks the receipt answers them one for one, and times it.
  Result<MapperBatchReceipt> call(std::vector<MapperOp> ops, bool step) {
    const size_t n = ops.size();
    const Clock::time_point t0 = Clock::now();
    auto receipt = session_.client().call(MapperBatch{next_trace(), std::move(ops)});
    (step ? result_.mapper_step_us : result_.mapper_us).push_back(micros_since(t0));
    if (!receipt.ok()) return receipt.error();
    if (receipt->outcomes.size() != n)
      return make_error(
          ErrorCode::invariant_violated,
          "a mapper receipt answers " + std::to_string(receipt->outcomes.size()) + " ops, not " + std::to_string(n),
          "outcomes");
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
    while (!admission_held_ && !ready_.empty() && live_.size() + binding.size() < o_.in_flight) {
      binding.push_back(std::move(ready_.front()));
      ready_.pop_front();
      const PendingRequest& p = binding.back().p;
      ops.emplace_back(std::in_place_type<MapperAllocOp>, RequestId{next_request_++}, RequestGeneration{1},
                       static_cast<uint32_t>(p.prompt.size() + p.decode_tokens));
    }
    if (ops.empty()) return Status::success();
    MapperBatchReceipt receipt;
    KVRT_TRY_ASSIGN(receipt, call(ops, false));
    for (size_t i = 0; i < settled; ++i)
      if (const auto* e = std::get_if<Error>(&receipt.outcomes[i])) note_error(*e);
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
      if (const auto* e = std::get_if<Error>(&stepped.outcomes[0])) return *e;
      const StepResult& result = std::get<StepResult>(stepped.outcomes[0]);
      ++result_.virtual_steps;
      // Short of handles: the next step maps what it can, synchronously.
      if (result.feasibility == MappingFeasibility::ready) {
        KVRT_TRY(count_receipts(result));
        for (const MappedFrontierReceipt& f : result.receipts) append_pages(f, UINT32_MAX, &ahead, &ahead);
      } else {
        ++result_.virtual_steps_infeasible;
      }
    }
    KVRT_TRY(await_ahead());
    map_in_background(std::move(ahead));
    return Status::success();
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
    if (const auto* e = std::get_if<Error>(&receipt.outcomes[0])) return *e;
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
    const Clock::time_point t0 = Clock::now();
    KVRT_TRY(await_ahead());
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

    std::vector<model::ForwardChunk> chunks;
    for (const SlotRequest& r : live_) chunks.push_back(model::ForwardChunk{&r.blocks, r.tokens, r.cached_rows});
    std::vector<std::vector<float>> logits;
    KVRT_TRY_ASSIGN(logits, model_.forward(cache_, chunks));
    for (size_t i = 0; i < live_.size(); ++i) {
      SlotRequest& r = live_[i];
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
    return Status::success();
  }

  // The background mapping of the last step's pages ahead, awaited: its
  // time counts as hidden, the wait as visible.
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

  Status verify(const SlotRequest& r) {
    // Every request fits its slot's T_max rows, so one slot's blocks hold any replay.
    if (replay_cache_ == nullptr)
      KVRT_TRY_ASSIGN(replay_cache_, model::LocalModelKvCache::create(cache_.layout(), cache_.blocks_per_slot()));
    // Nothing reused, nothing shared: every row is compared bitwise.
    const ReplayedRequest request{&r.blocks,     r.tokens,     static_cast<uint32_t>(r.q.p.prompt.size()),
                                  r.generated,   r.q.branch,   0,
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
  uint32_t stalled_steps_ = 0;   // infeasible steps in a row
  bool admission_held_ = false;  // a preemption holds admission until a request finishes
  EngineResult result_;
  // Request ids are the node's mapper's keys across every session: each
  // worker draws from its own range.
  uint64_t next_request_ = (uint64_t(o_.worker_index) + 1) << 40;
  uint64_t span_ = 0;
};

}  // namespace

Result<EngineResult> run_virtual_engine(EngineSession& session, MapperPoolView& view, VirtualModelKvCache& cache,
                                        const model::ReferenceModel& model, const EngineOptions& options,
                                        std::vector<const workload::Job*> jobs) {
  return VirtualEngine(session, view, cache, model, options, std::move(jobs)).run();
}

}  // namespace kvrt::engine
