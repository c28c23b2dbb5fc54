#include "engine/engine_session.hpp"

#include "engine/withdrawn_hit.hpp"

namespace kvrt {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

bool Admission::hit_withdrawn() const { return hit && allocation_error && engine::is_withdrawn_hit(*allocation_error); }

Result<std::unique_ptr<EngineSession>> EngineSession::connect(const NodeDescriptor& node, const std::string& token_hex,
                                                              const ClientOptions& options) {
  Result<std::unique_ptr<Client>> client = Client::connect(node, token_hex, options);
  if (!client.ok()) return client.error();
  return std::make_unique<EngineSession>(std::move(client).value());
}

EngineSession::EngineSession(std::unique_ptr<Client> client) : client_(std::move(client)) {}

template <class Request>
Result<receipt_of<Request>> EngineSession::timed(Owner owner, const Request& request) {
  const Clock::time_point t0 = Clock::now();
  Result<receipt_of<Request>> out = client_->call(request);
  if (observer_) observer_(owner, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  return out;
}

Result<AllocatorBatchReceipt> EngineSession::allocator(const AllocatorBatch& batch) {
  return timed(Owner::allocator, batch);
}

Result<PrefixBatchReceipt> EngineSession::prefix(const PrefixBatch& batch) { return timed(Owner::prefix_index, batch); }

Result<SessionSaveReceipt> EngineSession::save_session(const SessionSaveRequest& request) {
  return timed(Owner::reuse, request);
}

Result<SessionResumeReceipt> EngineSession::resume_session(const SessionResumeRequest& request) {
  return timed(Owner::reuse, request);
}

Result<PromptSchemaReceipt> EngineSession::register_prompt_schema(const PromptSchemaRequest& request) {
  return timed(Owner::reuse, request);
}

Result<PromptAssemblyReceipt> EngineSession::assemble_prompt(const PromptAssembleRequest& request) {
  return timed(Owner::reuse, request);
}

Result<PromptModulePublishReceipt> EngineSession::publish_prompt_module(const PromptModulePublishRequest& request) {
  return timed(Owner::reuse, request);
}

Result<ExecuteBatchReceipt> EngineSession::executor(const ExecuteBatch& batch) { return timed(Owner::executor, batch); }

Result<MapperBatchReceipt> EngineSession::mapper(const MapperBatch& batch) {
  Result<MapperBatchReceipt> receipt = timed(Owner::mapper, batch);
  if (receipt.ok() && receipt->outcomes.size() != batch.ops.size())
    return make_error(ErrorCode::invariant_violated,
                      "a mapper receipt answers " + std::to_string(receipt->outcomes.size()) + " ops, not " +
                          std::to_string(batch.ops.size()),
                      "outcomes");
  return receipt;
}

Result<NamespaceGrantReceipt> EngineSession::authorize(const std::string& namespace_name, const TraceContext& trace) {
  return timed(Owner::authorization, AuthorizeRequest{trace, namespace_name});
}

Result<std::vector<Admission>> EngineSession::admit(std::span<const AdmissionRequest> requests, bool reuse,
                                                    const TraceContext& reuse_trace,
                                                    const TraceContext& allocation_trace) {
  std::vector<Admission> out(requests.size());
  if (requests.empty()) return out;
  if (reuse) {
    ReuseBatch tx{reuse_trace, {}};
    const size_t ends = take_ends(tx);
    for (const AdmissionRequest& r : requests) {
      // Built in place: GCC 12 misreads a moved variant temporary here
      // (-Wmaybe-uninitialized on the other alternative).
      ReuseAcquireOp& op = std::get<ReuseAcquireOp>(tx.ops.emplace_back(std::in_place_type<ReuseAcquireOp>));
      op.namespace_name = r.namespace_name;
      op.tokens = r.tokens;
      op.logits_path = r.logits_path;
      op.identity = r.identity;
      op.await_slot_mapping = r.slot_request.has_value();
      op.slot_request = r.slot_request.value_or(RequestId{});
    }
    Result<ReuseBatchReceipt> reused = timed(Owner::reuse, tx);
    if (!reused.ok()) return reused.error();
    if (reused->outcomes.size() != tx.ops.size())
      return make_error(ErrorCode::rpc_failed, "the reuse receipt answers another number of ops", "reuse");
    KVRT_TRY(note_ends(*reused, ends));
    for (size_t i = 0; i < requests.size(); ++i) {
      ReuseOutcome& o = reused->outcomes[ends + i];
      if (auto* hit = std::get_if<ExecutableReuseReceipt>(&o))
        out[i].hit = std::move(*hit);
      else if (auto* rejection = std::get_if<ReuseRejectionReceipt>(&o))
        out[i].rejection = std::move(*rejection);
      else if (auto* e = std::get_if<Error>(&o))
        out[i].reuse_error = std::move(*e);
      else
        return make_error(ErrorCode::rpc_failed, "an acquire op was answered with a release receipt", "reuse");
    }
  }
  AllocatorBatch alloc{allocation_trace, {}};
  const uint32_t P = block_tokens();
  for (size_t i = 0; i < requests.size(); ++i) {
    const uint32_t hit = out[i].hit_tokens();
    alloc.ops.push_back(AllocateOp{static_cast<uint32_t>(requests[i].tokens.size()),
                                   out[i].hit ? out[i].hit->physical_handles : std::vector<PhysicalBlockHandle>{},
                                   std::nullopt, requests[i].namespace_name, P == 0 ? 0 : hit % P});
  }
  Result<AllocatorBatchReceipt> allocated = timed(Owner::allocator, alloc);
  if (!allocated.ok()) {
    // The hits' leases are the session's: their attempts end unexecuted
    // with the next reuse message (or when the session ends).
    for (const Admission& a : out)
      if (a.hit) end_reuse(a.hit->execution_snapshot_version, false, std::nullopt);
    return allocated.error();
  }
  if (allocated->outcomes.size() != requests.size())
    return make_error(ErrorCode::rpc_failed, "the allocation receipt answers another number of ops", "allocator");
  for (size_t i = 0; i < requests.size(); ++i) {
    Admission& a = out[i];
    if (auto* receipt = std::get_if<AllocationReceipt>(&allocated->outcomes[i]))
      a.allocation = std::move(*receipt);
    else
      a.allocation_error = std::get<Error>(allocated->outcomes[i]);
    // An attempt whose blocks the allocation did not take read nothing: it
    // ends unexecuted now. An admitted one ends when its prefill ran.
    if (a.hit && !a.admitted()) end_reuse(a.hit->execution_snapshot_version, false, std::nullopt);
  }
  return out;
}

template <class T>
Result<std::vector<Result<T>>> EngineSession::per_op(const PrefixBatch& batch) {
  std::vector<Result<T>> out;
  if (batch.ops.empty()) return out;
  Result<PrefixBatchReceipt> answered = timed(Owner::prefix_index, batch);
  if (!answered.ok()) return answered.error();
  if (answered->outcomes.size() != batch.ops.size())
    return make_error(ErrorCode::rpc_failed, "the prefix receipt answers another number of ops", "prefix");
  out.reserve(batch.ops.size());
  for (PrefixOutcome& o : answered->outcomes) {
    if (auto* receipt = std::get_if<T>(&o))
      out.emplace_back(std::move(*receipt));
    else if (auto* e = std::get_if<Error>(&o))
      out.emplace_back(std::move(*e));
    else
      return make_error(ErrorCode::rpc_failed, "an op was answered with an outcome of another kind", "prefix");
  }
  return out;
}

Result<std::vector<Result<PrefixMatchReceipt>>> EngineSession::lookup(std::span<const AdmissionRequest> requests,
                                                                      const TraceContext& trace) {
  PrefixBatch batch{trace, {}};
  for (const AdmissionRequest& r : requests) {
    // Built in place (GCC 12 -Wmaybe-uninitialized on a moved variant temporary).
    PrefixPeekOp& op = std::get<PrefixPeekOp>(batch.ops.emplace_back(std::in_place_type<PrefixPeekOp>));
    op.match.namespace_name = r.namespace_name;
    op.match.tokens = r.tokens;
    op.match.logits_path = r.logits_path;
    op.match.identity = r.identity;
  }
  return per_op<PrefixMatchReceipt>(batch);
}

Result<std::vector<Result<RadixSchedulerHandoffReceipt>>> EngineSession::handoff(
    std::span<const HandoffRequest> requests, const TraceContext& trace) {
  PrefixBatch batch{trace, {}};
  for (const HandoffRequest& r : requests) {
    PrefixHandoffOp& op = std::get<PrefixHandoffOp>(batch.ops.emplace_back(std::in_place_type<PrefixHandoffOp>));
    op.match.namespace_name = r.ask.namespace_name;
    op.match.request = r.request;
    op.match.tokens = r.ask.tokens;
    op.match.logits_path = r.ask.logits_path;
    op.match.identity = r.ask.identity;
    op.free_private_tail_slots = r.free_private_tail_slots;
  }
  return per_op<RadixSchedulerHandoffReceipt>(batch);
}

Result<std::vector<Result<HandoffDispositionReceipt>>> EngineSession::dispose_handoffs(
    std::span<const PrefixHandoffDispositionOp> dispositions, const TraceContext& trace) {
  PrefixBatch batch{trace, {}};
  for (const PrefixHandoffDispositionOp& d : dispositions)
    batch.ops.emplace_back(std::in_place_type<PrefixHandoffDispositionOp>, d);
  return per_op<HandoffDispositionReceipt>(batch);
}

void EngineSession::end_reuse(ExecutionSnapshotVersion attempt, bool executed,
                              std::optional<ReuseSuccessor> successor) {
  if (successor) pending_successors_.insert(successor->request.value);
  pending_ends_.push_back(ReuseReleaseOp{attempt, executed, std::move(successor)});
}

size_t EngineSession::take_ends(ReuseBatch& batch) {
  const size_t n = pending_ends_.size();
  batch.ops.insert(batch.ops.begin(), pending_ends_.begin(), pending_ends_.end());
  pending_ends_.clear();
  pending_successors_.clear();
  return n;
}

Status EngineSession::note_ends(const ReuseBatchReceipt& receipt, size_t ends) {
  if (receipt.outcomes.size() < ends)
    return make_error(ErrorCode::rpc_failed, "the reuse receipt answers fewer ops than were sent", "reuse");
  for (size_t i = 0; i < ends; ++i) {
    ++notes_.ended;
    if (const auto* e = std::get_if<Error>(&receipt.outcomes[i])) {
      notes_.errors.push_back(*e);
      continue;
    }
    const auto* r = std::get_if<ReuseReleaseReceipt>(&receipt.outcomes[i]);
    if (r == nullptr) return make_error(ErrorCode::rpc_failed, "a release op was answered out of order", "reuse");
    // A successor the index refused stays unpublished: the reuse is lost.
    if (r->successor_refused) notes_.errors.push_back(*r->successor_refused);
    if (r->published_successor) ++notes_.successors_published;
    // An owner that no longer held a lease: a bookkeeping error somewhere.
    if (!r->refused.empty())
      notes_.errors.push_back(make_error(ErrorCode::stale_generation,
                                         std::to_string(r->refused.size()) + " lease(s) of snapshot " +
                                             std::to_string(r->snapshot.value) + " were not held",
                                         "leases"));
  }
  return Status::success();
}

Status EngineSession::flush_reuse_ends(const TraceContext& trace) {
  if (pending_ends_.empty()) return Status::success();
  ReuseBatch tx{trace, {}};
  const size_t n = take_ends(tx);
  Result<ReuseBatchReceipt> r = timed(Owner::reuse, tx);
  if (!r.ok()) return r.error();
  if (r->outcomes.size() != n) return make_error(ErrorCode::rpc_failed, "the release answer has another size", "reuse");
  return note_ends(*r, n);
}

ReuseEndNotes EngineSession::take_reuse_end_notes() { return std::exchange(notes_, ReuseEndNotes{}); }

}  // namespace kvrt
