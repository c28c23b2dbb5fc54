#include "services/reuse/reuse_attempt.hpp"

#include <string>

namespace kvrt {

std::string_view to_string(ReusePhase p) {
  switch (p) {
    case ReusePhase::open:
      return "open";
    case ReusePhase::executed:
      return "executed";
    case ReusePhase::completed:
      return "completed";
    case ReusePhase::rejected:
      return "rejected";
  }
  return "unknown_reuse_phase";
}

Result<ReuseAttempt> ReuseAttempt::begin(const ReuseRequest& request) {
  if (request.namespace_name.empty())
    return make_error(ErrorCode::invalid_argument, "a reuse attempt names the namespace it reuses from",
                      "namespace_name");
  return ReuseAttempt(request);
}

Result<StepOutcome> ReuseAttempt::advance(const StepEvidence& evidence) {
  const ReuseStep step = step_of(evidence);
  if (phase_ == ReusePhase::rejected || phase_ == ReusePhase::completed)
    return make_error(ErrorCode::reuse_attempt_closed,
                      "attempt for request " + std::to_string(request_.request_id.value) + " is " +
                          std::string(to_string(phase_)) + "; step " + std::string(to_string(step)) +
                          " is not accepted",
                      std::string(to_string(step)));
  if (step != next_)
    return make_error(ErrorCode::reuse_step_out_of_order,
                      "evidence for step " + std::to_string(static_cast<int>(step)) + " (" +
                          std::string(to_string(step)) + ") while the attempt expects step " +
                          std::to_string(static_cast<int>(next_)) + " (" + std::string(to_string(next_)) + ")",
                      std::string(to_string(step)));
  switch (step) {
    case ReuseStep::authorize:
      return step_authorize(std::get<0>(evidence));
    case ReuseStep::build_key:
      return step_build_key(std::get<1>(evidence));
    case ReuseStep::lookup_candidate:
      return step_lookup(std::get<2>(evidence));
    case ReuseStep::acquire_leases:
      return step_acquire_leases(std::get<3>(evidence));
    case ReuseStep::validate_versions:
      return step_validate_versions(std::get<4>(evidence));
    case ReuseStep::validate_positions:
      return step_validate_positions(std::get<5>(evidence));
    case ReuseStep::await_mapping:
      return step_await_mapping(std::get<6>(evidence));
    case ReuseStep::freeze_snapshot:
      return step_freeze_snapshot(std::get<7>(evidence));
    case ReuseStep::execute:
      return step_execute(std::get<8>(evidence));
    case ReuseStep::finish:
      return step_finish(std::get<9>(evidence));
  }
  return make_error(ErrorCode::invalid_argument, "unknown reuse step", "step");
}

StepOutcome ReuseAttempt::reject(ReuseStep step, RejectionReason reason, std::string detail,
                                 const std::vector<LeaseId>& acquired_now) {
  ReuseRejection r{step, reason, std::move(detail), leases_};
  r.leases_to_release.insert(r.leases_to_release.end(), acquired_now.begin(), acquired_now.end());
  rejection_ = r;
  phase_ = ReusePhase::rejected;
  StepOutcome out;
  out.step = step;
  out.rejection = std::move(r);
  return out;
}

std::optional<FunnelOutcome> ReuseAttempt::funnel_outcome() const {
  if (phase_ == ReusePhase::rejected) return FunnelOutcome::rejected(rejection_->reason);
  if (phase_ == ReusePhase::executed || phase_ == ReusePhase::completed) return FunnelOutcome::hit();
  return std::nullopt;
}

ExecutableReuseReceipt ReuseAttempt::build_receipt() const {
  const ReuseCandidate& c = *candidate_;
  ExecutableReuseReceipt r;
  r.request_id = request_.request_id;
  r.request_generation = request_.request_generation;
  r.source = c.source;
  r.namespace_id = grant_->namespace_name;
  r.namespace_generation = *e_.namespace_generation;
  r.semantic_digest = *e_.semantic_digest;
  r.layout_digest = *e_.layout_digest;
  r.index_version = *e_.index_version;
  r.tree_version = *e_.tree_version;
  r.pool_generations = e_.pool_generations;
  r.covered_interval = c.covered_interval;
  r.physical_handles = c.physical_handles;
  r.path_node_ids = c.path_node_ids;
  r.leases = leases_;
  r.collision_witness_verified = witness_verified_;
  r.required_frontier_tokens = *required_frontier_tokens_;
  r.ready_frontier_tokens = *e_.ready_frontier_tokens;
  r.execution_snapshot_version = *e_.execution_snapshot_version;
  r.kernel_abi_id = kernel_abi_id_;
  return r;
}

Sha256Digest ReuseAttempt::evidence_digest() const {
  CanonicalWriter w("kvrt.ReuseAttempt.evidence.v1");
  w.u8("next_step", static_cast<uint8_t>(next_));
  w.u8("executed", phase_ == ReusePhase::executed || phase_ == ReusePhase::completed);
  w.u8("completed", completion_.has_value());
  w.u8("has_grant", grant_.has_value());
  if (grant_)
    w.u64("principal", grant_->principal.value)
        .str("namespace", grant_->namespace_name)
        .u64("generation", grant_->generation.value)
        .u64("grant", grant_->grant_id.value);
  w.u64("g_ns", e_.namespace_generation ? e_.namespace_generation->value : 0);
  w.digest("d_sem", e_.semantic_digest.value_or(Sha256Digest{}));
  w.digest("d_layout", e_.layout_digest.value_or(Sha256Digest{}));
  w.u64("v_index", e_.index_version.value_or(0));
  w.u64("v_tree", e_.tree_version ? e_.tree_version->value : 0);
  w.begin_list("g_pool", e_.pool_generations.size());
  for (const PoolGenerationRef& p : e_.pool_generations) w.u32("pool", p.pool.value).u32("gen", p.generation.value);
  w.u64("f_map", e_.ready_frontier_tokens ? uint64_t{*e_.ready_frontier_tokens} + 1 : 0);
  w.u64("v_exec", e_.execution_snapshot_version ? e_.execution_snapshot_version->value + 1 : 0);
  w.digest("tokens", covered_tokens_digest(token_ids_));
  w.u8("has_candidate", candidate_.has_value());
  if (candidate_) {
    w.u8("source", static_cast<uint8_t>(candidate_->source))
        .u32("begin", candidate_->covered_interval.begin)
        .u32("end", candidate_->covered_interval.end);
    w.begin_list("handles", candidate_->physical_handles.size());
    for (const PhysicalBlockHandle& h : candidate_->physical_handles)
      w.u32("pool", h.pool.value)
          .u32("group", h.group.value)
          .u32("block", h.block.value)
          .u32("gen", h.generation.value);
    w.begin_list("path", candidate_->path_node_ids.size());
    for (RadixNodeId n : candidate_->path_node_ids) w.u64("node", n.value);
  }
  w.u8("witness_verified", witness_verified_);
  w.begin_list("leases", leases_.size());
  for (LeaseId l : leases_) w.u64("lease", l.value);
  w.u64("f_required", required_frontier_tokens_ ? uint64_t{*required_frontier_tokens_} + 1 : 0);
  w.str("kernel_abi", kernel_abi_id_);
  return w.finish();
}

}  // namespace kvrt
