// The engine loop of a `kvrt run` worker: the loop itself, the job
// queue, and the calls to the node with their receipt latencies.
#include "engine/engine_loop.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/engine_replay.hpp"
#include "engine/owner_call_timing.hpp"
#include "engine/table_entries.hpp"

namespace kvrt::engine {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

EngineLoop::EngineLoop(EngineSession& session, const model::ReferenceModel& model, model::ModelKvCache& shared,
                       const EngineOptions& o, std::vector<const workload::Job*> jobs)
    : session_(&session),
      model_(model),
      variants_(model, shared.layout()),
      shared_(&shared),
      o_(o),
      jobs_(std::move(jobs)),
      P_(shared.layout().allocator_block_size),
      groups_(static_cast<uint32_t>(shared.layout().cache_groups.size())),
      row_bytes_(shared.layout().row_bytes()) {
  result_.worker = o.worker_name;
  observe_calls(session);
  // Templated prompts of a later schema generation wait until the share's
  // others were queued: the worker moves to a revised schema once it has
  // served its prompts of the older one (registering it refuses those).
  auto revised = [&](const workload::Job* job) {
    return job->templated && o.workload != nullptr && o.workload->schemas.at(job->templated->schema).generation > 1;
  };
  for (const bool later : {false, true})
    for (const workload::Job* job : jobs_) {
      if (revised(job) != later) continue;
      result_.requests_total += job->kind == workload::JobKind::fork ? job->branches : job->turns.size();
      enqueue_job(*job);
    }
}

Result<EngineResult> EngineLoop::run() {
  const Clock::time_point start = Clock::now();
  // A lost session (the node died or ended it) sends the rest of the share
  // down the private path; any other error ends the run.
  auto lost = [this](const Error& e) {
    return o_.serve_privately_on_loss && (e.code == ErrorCode::node_lost || e.code == ErrorCode::session_ended);
  };
  auto step = [this]() -> Status {
    KVRT_TRY(reauthorize_if_stale());
    KVRT_TRY(admit());
    KVRT_TRY(decode_step());
    return finish();
  };
  if (Status s = authorize_namespaces(); !s.ok()) {
    if (!lost(s.error())) return s.error();
    KVRT_TRY(recover(s.error()));
  }
  if (o_.on_progress) o_.on_progress(EngineProgress{0, result_.requests_total, 0});
  Clock::time_point stalled_since = Clock::now();
  while (!ready_.empty() || !live_.empty()) {
    const uint64_t before = progress_marker();
    if (Status s = step(); !s.ok()) {
      if (!lost(s.error())) return s.error();
      KVRT_TRY(recover(s.error()));
      stalled_since = Clock::now();
      continue;
    }
    if (progress_marker() != before) {
      stalled_since = Clock::now();
    } else {
      // Nothing moved: every admission and append was refused for capacity
      // or for a namespace's block quota (other workers hold the blocks).
      // Wait for them; a pool or quota too small for even one request is a
      // configuration error, not a hang. The engine does not preempt.
      if (Clock::now() - stalled_since > std::chrono::seconds(30))
        return make_error(ErrorCode::run_stalled,
                          o_.worker_name + " made no progress for 30 s: the pools " +
                              (result_.quota_exceeded_retries > 0 ? "or its namespaces' block quotas " : "") +
                              "cannot hold its requests",
                          result_.quota_exceeded_retries > 0 ? "quota_blocks" : "blocks_per_group");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  KVRT_TRY(release_receipts());
  result_.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result_;
}

uint64_t EngineLoop::progress_marker() const {
  return result_.requests + result_.prefill_rows_computed + result_.decode_rows_computed + failed_requests_;
}

void EngineLoop::enqueue_job(const workload::Job& job) {
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
    case workload::JobKind::templated:
      // Independent questions over one shared prefix (or one schema).
      for (uint32_t t = 0; t < job.turns.size(); ++t) ready_.push_back(turn_request(job, t, job.prefix));
      break;
  }
}

TraceContext EngineLoop::next_trace() { return TraceContext{(uint64_t(::getpid()) << 32) ^ ++span_, span_, 0}; }

void EngineLoop::note_error(const Error& e) {
  // An owner's fault point ended the op (a fault-injection run): the owner
  // undid it and the request goes on without it (no reuse, no publication).
  if (e.code == ErrorCode::fault_injected) {
    ++result_.faults_absorbed;
    return;
  }
  if (e.code == ErrorCode::authorization_stale_generation) return note_stale_generation();
  // A purge of the namespace (0x0CE): it stops admitting until its successor
  // is current (steps 1-2), and revokes the executable-reuse receipts of the
  // old generation that outlive its deadline (step 4). The requests keep the
  // blocks they hold and go on; neither is an error of this worker.
  if (e.code == ErrorCode::authorization_namespace_closed) {
    ++result_.namespace_closed_refusals;
    grants_stale_ = true;
    return;
  }
  if (e.code == ErrorCode::reuse_receipt_revoked) {
    ++result_.receipts_revoked;
    return;
  }
  ++result_.operation_errors;
  if (result_.first_error.empty()) result_.first_error = e.describe();
}

void EngineLoop::observe_calls(EngineSession& session) { observe_owner_calls(session, result_); }

void EngineLoop::take_end_notes() {
  for (const Error& e : session_->take_reuse_end_notes().errors) note_error(e);
}

Status EngineLoop::release_receipts() {
  KVRT_TRY(session_->flush_reuse_ends(next_trace()));
  take_end_notes();
  return Status::success();
}

Status EngineLoop::publish_batch(const PrefixBatch& publish) {
  if (publish.ops.empty()) return Status::success();
  auto published = session_->prefix(publish);
  if (!published.ok()) return published.error();
  for (const PrefixOutcome& o : published->outcomes)
    if (const auto* e = std::get_if<Error>(&o)) note_error(*e);
  return Status::success();
}

Status EngineLoop::authorize_namespaces() {
  std::set<std::string> names;
  for (const workload::Job* job : jobs_) names.insert(job->namespace_name);
  for (const std::string& ns : names) {
    Result<NamespaceGrantReceipt> grant = session_->authorize(ns, next_trace());
    if (!grant.ok()) {
      // Closed by a purge in progress: authorized again next iteration; the
      // namespace's requests go on under the last view meanwhile, their
      // lookups and publications refused.
      if (grant.error().code == ErrorCode::authorization_namespace_closed) {
        note_error(grant.error());
        continue;
      }
      return grant.error();
    }
    const model::ReferenceModel* weights = nullptr;
    KVRT_TRY_ASSIGN(weights, variants_.get(grant->model_generation, grant->adapter_identity));
    views_[ns] = NamespaceView{grant->generation, weights, grant->adapter_identity};
  }
  result_.weight_variants = variants_.drawn();
  return register_prompt_schemas(names);
}

const model::ReferenceModel& EngineLoop::current_model(const std::string& namespace_name) const {
  const auto it = views_.find(namespace_name);
  return it == views_.end() ? model_ : *it->second.model;
}

RequestIdentity EngineLoop::identity_of(const std::string& adapter) {
  RequestIdentity id;
  id.adapter_id = adapter;
  return id;
}

Result<std::vector<std::vector<float>>> EngineLoop::forward_by_model(
    std::span<const model::ForwardChunk> chunks, std::span<const model::ReferenceModel* const> models) {
  std::map<const model::ReferenceModel*, std::vector<size_t>> by_model;
  for (size_t i = 0; i < chunks.size(); ++i) by_model[models[i]].push_back(i);
  std::vector<std::vector<float>> logits(chunks.size());
  for (const auto& [m, members] : by_model) {
    std::vector<model::ForwardChunk> part;
    for (size_t i : members) part.push_back(chunks[i]);
    std::vector<std::vector<float>> out;
    KVRT_TRY_ASSIGN(out, m->forward(*shared_, part));
    for (size_t k = 0; k < members.size(); ++k) logits[members[k]] = std::move(out[k]);
  }
  return logits;
}

void EngineLoop::note_stale_generation() {
  ++result_.stale_generation_refusals;
  grants_stale_ = true;
}

Status EngineLoop::reauthorize_if_stale() {
  if (!grants_stale_) return Status::success();
  grants_stale_ = false;
  // Authorizing a namespace again answers its current generation (a grant
  // still current is answered as it is). The first-block keys seeded under
  // the old generation seed nothing under the new one.
  KVRT_TRY(authorize_namespaces());
  seeds_.clear();
  ++result_.reauthorizations;
  // Weights no namespace and no running request uses any more go.
  std::set<const model::ReferenceModel*> in_use;
  for (const auto& [ns, view] : views_) in_use.insert(view.model);
  for (const LiveRequest& r : live_) in_use.insert(r.admitted.model);
  variants_.retain(in_use);
  return Status::success();
}

Status EngineLoop::apply_entries(LiveRequest& r, const std::vector<TableEntryUpdate>& entries) {
  // A replaced block holds rows the node wrote (a copy-on-write copy): the
  // host copy of a staged cache has them only after a load.
  for (const TableEntryUpdate& e : entries)
    if (uint64_t{e.logical_block} * P_ < r.staged_rows) r.staged_rows = e.logical_block * P_;
  return apply_table_entries(shared_->layout(), entries, r.blocks);
}

Status EngineLoop::stage_rows(bool load, const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) {
  if (!shared_->staged() || begin >= end) return Status::success();
  KVRT_TRY(load ? shared_->load_rows(blocks, begin, end) : shared_->store_rows(blocks, begin, end));
  (load ? result_.staged_rows_loaded : result_.staged_rows_stored) += end - begin;
  return Status::success();
}

Status EngineLoop::load_staged(LiveRequest& r, uint32_t end) {
  if (r.staged_rows >= end) return Status::success();
  KVRT_TRY(stage_rows(true, r.blocks, r.staged_rows, end));
  r.staged_rows = end;
  return Status::success();
}

Status EngineLoop::store_staged(LiveRequest& r, uint32_t end) {
  if (r.staged_rows >= end) return Status::success();
  KVRT_TRY(stage_rows(false, r.blocks, r.staged_rows, end));
  r.staged_rows = end;
  return Status::success();
}

// One private cache, as large as this worker's longest request: the
// exactness replay and the private path both prefill into it from row 0.
Status EngineLoop::ensure_private_cache() {
  if (replay_cache_ != nullptr) return Status::success();
  uint32_t longest = 0, module_blocks = 0;
  for (const workload::Job* job : jobs_) {
    // A templated prompt's modules are computed alone in blocks after its own.
    if (job->templated)
      for (const workload::TemplatedItem& item : job->templated->items)
        if (!item.module_id.empty())
          module_blocks = std::max(module_blocks, static_cast<uint32_t>((item.tokens.size() + P_ - 1) / P_));
    uint32_t history = static_cast<uint32_t>(job->prefix.size());
    for (const workload::Turn& t : job->turns) {
      const uint32_t context = history + static_cast<uint32_t>(t.user_tokens.size()) + std::max(1u, t.decode_tokens);
      longest = std::max(longest, context);
      if (job->kind == workload::JobKind::chat) history = context;
    }
  }
  Result<std::unique_ptr<model::LocalModelKvCache>> cache =
      model::LocalModelKvCache::create(shared_->layout(), (longest + P_ - 1) / P_ + 1 + module_blocks);
  if (!cache.ok()) return cache.error();
  replay_cache_ = std::move(*cache);
  return Status::success();
}

void EngineLoop::verify(const LiveRequest& r) {
  if (Status s = ensure_private_cache(); !s.ok()) return note_error(s.error());
  // Rows loaded from the session tier count as reused: the turn did not compute them.
  ReplayedRequest request{&r.blocks,       r.tokens,
                          r.prompt_tokens, r.generated,
                          r.branch,        r.hit_tokens + r.resumed_rows,
                          r.cached_rows,   std::min(r.exact_rows, r.cached_rows),
                          r.segments,      r.reused_segments};
  // Replayed with the weights the request was admitted with: a row reused
  // from another generation (other weights) differs bitwise.
  Result<ReplayVerdict> verdict = replay_without_reuse(r.weights(), *replay_cache_, *shared_, request);
  if (!verdict.ok()) {
    note_error(verdict.error());
    return;
  }
  add_verdict(result_, *verdict,
              o_.worker_name + " job " + std::to_string(r.job->id) + " turn " + std::to_string(r.turn) + " branch " +
                  std::to_string(r.branch));
}

}  // namespace kvrt::engine
