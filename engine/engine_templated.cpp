// Templated prompts in the engine loop (Prompt Cache, spec 0x0CB): a
// workload job written against a prompt schema is admitted here instead of
// through the prefix reuse transaction, because its rows are not what a
// causal prefill of its tokens computes (modules attend only within
// themselves, positions jump over the schema's gaps): they are never looked
// up in, nor published to, the prefix index.
//
// One request, in storage order (engine/templated_prompt.hpp):
//   1. its blocks (AllocateOp, no hit);
//   2. the node's assembly: each module reused (the session's leases on its
//      blocks) or a miss with its reason;
//   3. per segment: a reused module's rows copied from its blocks (then its
//      leases go back); a missed module computed alone at its declared
//      positions in a request of its own, published to the node's module
//      store, and copied; free text computed over every earlier row;
//   4. commit, the first token from the last segment (the question).
// Then it decodes like any request, with its position ids extended, and the
// verification replays the whole prompt under the same contract with
// nothing reused (model::generate_declared_prompt).
#include <chrono>

#include "engine/engine_loop.hpp"
#include "engine/templated_prompt.hpp"

namespace kvrt::engine {

namespace {

uint64_t micros_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

bool session_lost(const Error& e) { return e.code == ErrorCode::node_lost || e.code == ErrorCode::session_ended; }

// A module's blocks as a table, from handles named bundle-major (block j of
// every group); the node's pools use block id == slot.
model::SequenceBlocks blocks_of(const std::vector<PhysicalBlockHandle>& handles, uint32_t groups) {
  model::SequenceBlocks out;
  out.slots.assign(groups, {});
  for (size_t i = 0; i < handles.size(); ++i) out.slots[i % groups].push_back(handles[i].block.value);
  return out;
}

}  // namespace

// Each schema's first generation, when the worker (re)authorizes; a later
// generation when the first prompt written against it comes (a revision
// during serving: prompts of the older one are refused from then on).
Status EngineLoop::register_prompt_schemas(const std::set<std::string>& namespaces) {
  if (!o_.reuse || o_.workload == nullptr) return Status::success();
  std::set<std::pair<std::string, std::string>> seen;
  for (const workload::TemplatedSchema& s : o_.workload->schemas) {
    if (!namespaces.contains(s.namespace_name) || !views_.contains(s.namespace_name)) continue;
    if (!seen.emplace(s.namespace_name, s.schema_id).second) continue;  // generations come in order
    KVRT_TRY(register_prompt_schema(s));
  }
  return Status::success();
}

Status EngineLoop::register_prompt_schema(const workload::TemplatedSchema& s) {
  Result<PromptSchemaReceipt> registered =
      session_->register_prompt_schema(PromptSchemaRequest{next_trace(), s.namespace_name, s.toml});
  if (registered.ok()) {
    uint64_t& known = schema_generations_[{s.namespace_name, s.schema_id}];
    known = std::max(known, registered->generation);
    return Status::success();
  }
  return error_of_prompt_call(registered.error());  // the prompts go on computing every module
}

Status EngineLoop::error_of_prompt_call(const Error& e) {
  if (session_lost(e)) return e;
  // Another worker registered a newer generation of the schema: this
  // prompt computes every module and publishes none (not an error).
  if (e.code == ErrorCode::stale_generation) {
    ++result_.prompt_stale_schema;
    return Status::success();
  }
  note_error(e);
  return Status::success();
}

Result<bool> EngineLoop::admit_templated(const PendingRequest& p) {
  const workload::Job& job = *p.job;
  const std::vector<model::DeclaredSegmentRows> segments = declared_segments(*job.templated);
  const uint32_t prompt = static_cast<uint32_t>(p.prompt.size());
  // 1. The request's own blocks.
  AllocatorBatch allocate{next_trace(), {}};
  allocate.ops.emplace_back(std::in_place_type<AllocateOp>, prompt, std::vector<PhysicalBlockHandle>{}, std::nullopt,
                            job.namespace_name);
  AllocatorBatchReceipt allocated;
  KVRT_TRY_ASSIGN(allocated, session_->allocator(allocate));
  const auto* receipt = std::get_if<AllocationReceipt>(&allocated.outcomes.at(0));
  if (receipt == nullptr) {
    note_error(std::get<Error>(allocated.outcomes[0]));
    ++failed_requests_;
    return true;
  }
  if (receipt->outcome != AllocationOutcome::committed) {
    ++(receipt->outcome == AllocationOutcome::quota_exceeded ? result_.quota_exceeded_retries
                                                             : result_.out_of_capacity_retries);
    return false;
  }
  LiveRequest r;
  r.job = &job;
  r.turn = p.turn;
  r.tokens = p.prompt;
  r.prompt_tokens = prompt;
  r.decode_target = p.decode_tokens;
  r.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
  r.blocks.slots.resize(groups_);
  r.admitted = views_.at(job.namespace_name);
  r.segments = segments;
  r.reused_segments.assign(segments.size(), 0);
  r.positions = model::declared_positions(segments);
  KVRT_TRY(apply_entries(r, receipt->published_entries));
  ++result_.prompt_requests;

  // 2. The node's assembly (with reuse on): which modules are reused.
  std::vector<std::optional<PromptSegment>> answered(segments.size());
  if (o_.reuse) {
    const workload::TemplatedSchema& schema = o_.workload->schemas.at(job.templated->schema);
    const auto known = schema_generations_.find({schema.namespace_name, schema.schema_id});
    if (known == schema_generations_.end() || known->second < schema.generation)
      KVRT_TRY(register_prompt_schema(schema));
    Result<PromptAssemblyReceipt> assembly = session_->assemble_prompt(assemble_request(job, schema, next_trace()));
    if (!assembly.ok()) {
      KVRT_TRY(error_of_prompt_call(assembly.error()));
    } else if (assembly->segments.size() == segments.size()) {
      // Each segment names its item; the job's items are in declared order,
      // so item i is segment i of the storage layout.
      for (PromptSegment& seg : assembly->segments)
        if (seg.item < segments.size() && seg.position_begin == segments[seg.item].position_begin)
          answered[seg.item] = std::move(seg);
    } else {
      note_error(make_error(ErrorCode::invariant_violated, "an assembly of another segment count than the prompt's",
                            "prompt_assemble"));
    }
  }

  // 3. Every segment in storage order.
  const model::ReferenceModel& weights = r.weights();
  std::vector<float> logits;
  AllocatorBatch give_back{next_trace(), {}};
  for (size_t i = 0; i < segments.size(); ++i) {
    const model::DeclaredSegmentRows& s = segments[i];
    const std::span<const TokenId> tokens = std::span<const TokenId>(r.tokens).subspan(s.row_begin, s.rows);
    if (!s.module) {
      const auto started = std::chrono::steady_clock::now();
      KVRT_TRY_ASSIGN(logits, model::compute_free_text(weights, *shared_, r.blocks,
                                                       std::span<const TokenId>(r.tokens).first(s.row_begin + s.rows),
                                                       r.positions, s.row_begin));
      result_.prefill_compute_us += micros_since(started);
      result_.prefill_rows_computed += s.rows;
      continue;
    }
    const PromptSegment* seg = answered[i] ? &*answered[i] : nullptr;
    if (seg != nullptr)
      if (const auto* use = std::get_if<PromptModuleUse>(&seg->outcome)) {
        const auto started = std::chrono::steady_clock::now();
        const model::SequenceBlocks module_blocks = blocks_of(use->handles, groups_);
        KVRT_TRY(stage_rows(true, module_blocks, 0, s.rows));  // another process computed them
        KVRT_TRY(model::copy_kv_rows(*shared_, module_blocks, *shared_, r.blocks, 0, s.rows, s.row_begin));
        for (uint64_t l : use->leases) give_back.ops.emplace_back(std::in_place_type<ReleaseLeaseOp>, LeaseId{l});
        result_.prompt_copy_us += micros_since(started);
        r.reused_segments[i] = 1;
        funnel_.record(FunnelOutcome::hit());  // a module lookup is a reuse attempt (0x0CD step 6)
        ++result_.prompt_modules_reused;
        result_.prompt_module_rows_reused += s.rows;
        result_.prefill_rows_reused += s.rows;
        continue;
      }
    if (seg != nullptr)
      if (const auto* miss = std::get_if<PromptModuleMiss>(&seg->outcome)) {
        ++(miss->reason == RejectionReason::no_candidate ? result_.prompt_misses_not_computed
                                                         : result_.prompt_misses_incompatible);
        funnel_.record(FunnelOutcome::rejected(miss->reason));
      }
    KVRT_TRY(compute_module(r, i, seg != nullptr && o_.reuse));
  }
  if (!give_back.ops.empty()) {
    Result<AllocatorBatchReceipt> back = session_->allocator(give_back);
    if (!back.ok()) return back.error();
    for (const AllocatorOutcome& o : back->outcomes)
      if (const auto* e = std::get_if<Error>(&o)) note_error(*e);
  }

  // 4. Commit the prompt's rows; the question's last row chooses the first token.
  KVRT_TRY(store_staged(r, prompt));
  AllocatorBatch commit{next_trace(), {}};
  commit.ops.emplace_back(std::in_place_type<CommitRowsOp>, r.fence, prompt);
  AllocatorBatchReceipt committed;
  KVRT_TRY_ASSIGN(committed, session_->allocator(commit));
  if (const auto* c = std::get_if<AllocationReceipt>(&committed.outcomes.at(0))) {
    r.fence.table_version = c->table_version_after;
    r.cached_rows = prompt;
    r.exact_rows = prompt;
  } else {
    note_error(std::get<Error>(committed.outcomes[0]));
    r.failed = true;
  }
  result_.prompt_tokens += prompt;
  r.tokens.push_back(model::greedy_token(logits));
  r.positions.push_back(r.positions.back() + 1);
  r.generated = 1;
  live_.push_back(std::move(r));
  return true;
}

// A module computed alone at its declared positions, then copied into the
// request's rows. In a request of its own in the node's pools, published
// to the node's module store when `publish`; in the worker's private cache
// when the pools have no room for it (then it is not published).
Status EngineLoop::compute_module(LiveRequest& r, size_t segment, bool publish) {
  const model::DeclaredSegmentRows& s = r.segments[segment];
  const workload::TemplatedItem& item = r.job->templated->items.at(segment);
  const model::ReferenceModel& weights = r.weights();
  const auto started = std::chrono::steady_clock::now();
  ++result_.prompt_modules_computed;
  result_.prompt_module_rows_computed += s.rows;
  result_.prefill_rows_computed += s.rows;
  AllocatorBatch allocate{next_trace(), {}};
  allocate.ops.emplace_back(std::in_place_type<AllocateOp>, s.rows, std::vector<PhysicalBlockHandle>{}, std::nullopt,
                            r.job->namespace_name);
  AllocatorBatchReceipt allocated;
  KVRT_TRY_ASSIGN(allocated, session_->allocator(allocate));
  const auto* receipt = std::get_if<AllocationReceipt>(&allocated.outcomes.at(0));
  if (receipt == nullptr || receipt->outcome != AllocationOutcome::committed) {
    // No room in the pools: alone in the worker's own cache, not published.
    if (receipt == nullptr) note_error(std::get<Error>(allocated.outcomes[0]));
    KVRT_TRY(ensure_private_cache());
    model::SequenceBlocks scratch;
    scratch.slots.assign(groups_, {});
    for (uint32_t g = 0; g < groups_; ++g)
      for (uint32_t j = 0; j < (s.rows + P_ - 1) / P_; ++j) scratch.slots[g].push_back(j);
    KVRT_TRY(model::compute_module_alone(weights, *replay_cache_, scratch, item.tokens, s.position_begin));
    KVRT_TRY(model::copy_kv_rows(*replay_cache_, scratch, *shared_, r.blocks, 0, s.rows, s.row_begin));
    result_.prefill_compute_us += micros_since(started);
    return Status::success();
  }
  LiveRequest module;
  module.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
  module.blocks.slots.resize(groups_);
  KVRT_TRY(apply_entries(module, receipt->published_entries));
  KVRT_TRY(model::compute_module_alone(weights, *shared_, module.blocks, item.tokens, s.position_begin));
  KVRT_TRY(stage_rows(false, module.blocks, 0, s.rows));  // in the pools before its commit and publication
  KVRT_TRY(model::copy_kv_rows(*shared_, module.blocks, *shared_, r.blocks, 0, s.rows, s.row_begin));
  result_.prefill_compute_us += micros_since(started);
  AllocatorBatch commit{next_trace(), {}};
  commit.ops.emplace_back(std::in_place_type<CommitRowsOp>, module.fence, s.rows);
  AllocatorBatchReceipt committed;
  KVRT_TRY_ASSIGN(committed, session_->allocator(commit));
  const auto* rows = std::get_if<AllocationReceipt>(&committed.outcomes.at(0));
  const bool rows_committed = rows != nullptr;
  if (rows_committed)
    module.fence.table_version = rows->table_version_after;
  else
    note_error(std::get<Error>(committed.outcomes[0]));
  if (publish && rows_committed) {
    PromptModulePublishRequest ask;
    ask.trace = next_trace();
    ask.namespace_name = r.job->namespace_name;
    const workload::TemplatedSchema& schema = o_.workload->schemas.at(r.job->templated->schema);
    ask.schema_id = schema.schema_id;
    ask.schema_generation = schema.generation;
    ask.module_id = item.module_id;
    for (const auto& [name, value] : item.parameters) ask.parameters.push_back(PromptParameter{name, value});
    ask.tokens = item.tokens;
    ask.request = module.fence.request;
    Result<PromptModulePublishReceipt> published = session_->publish_prompt_module(ask);
    if (published.ok())
      ++result_.prompt_modules_published;
    else
      KVRT_TRY(error_of_prompt_call(published.error()));
  }
  // The module's own request ends; the store's node leases keep its blocks.
  AllocatorBatch release{next_trace(), {}};
  release.ops.emplace_back(std::in_place_type<ReleaseOp>, module.fence, ReleaseReason::finished);
  AllocatorBatchReceipt released;
  KVRT_TRY_ASSIGN(released, session_->allocator(release));
  if (const auto* e = std::get_if<Error>(&released.outcomes.at(0))) note_error(*e);
  return Status::success();
}

}  // namespace kvrt::engine
