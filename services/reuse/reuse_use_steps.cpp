// Steps 6-10 of the executable-reuse transaction (spec 0x0CD): positions or
// session interval, mapping, snapshot, execution and completion. See
// reuse_attempt.hpp for the outcome rules.
#include <algorithm>
#include <set>
#include <string>

#include "services/reuse/reuse_attempt.hpp"
#include "services/telemetry/reconciliation_gauges.hpp"

namespace kvrt {
namespace {

Error mismatch(ReuseStep step, std::string reason) {
  return make_error(ErrorCode::reuse_evidence_mismatch, std::move(reason), std::string(to_string(step)));
}

std::string interval_text(const TokenInterval& t) {
  std::string out("[");
  out.append(std::to_string(t.begin)).append(", ").append(std::to_string(t.end)).append(")");
  return out;
}

}  // namespace

Result<StepOutcome> ReuseAttempt::step_validate_positions(const PositionAnswer& answer) {
  constexpr ReuseStep step = ReuseStep::validate_positions;
  const ReuseCandidate& c = *candidate_;
  const std::span<const uint32_t> covered(token_ids_.data() + c.covered_interval.begin,
                                          c.covered_interval.end - c.covered_interval.begin);
  const bool module = c.source == ReuseSource::prompt_module, session = c.source == ReuseSource::session;
  if (std::holds_alternative<PositionsNotApplicable>(answer)) {
    if (module || session) return mismatch(step, "module and session candidates need their position evidence");
  } else if (const auto* m = std::get_if<ModulePositionAnswer>(&answer)) {
    if (!module) return mismatch(step, "module position evidence for a non-module candidate");
    const PromptModuleReceipt& r = m->module;
    // N_module = |token_ids| = |position_ids| (0x0CB): a receipt breaking it is malformed.
    if (r.token_ids.size() != r.position_ids.size())
      return mismatch(step, "module receipt has " + std::to_string(r.token_ids.size()) + " tokens and " +
                                std::to_string(r.position_ids.size()) + " positions");
    if (m->declared_position_ids.size() != covered.size())
      return mismatch(step, "declared positions do not cover the candidate's interval");
    // H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c], plus the namespace.
    if (r.namespace_id != grant_->namespace_name)
      return reject(step, RejectionReason::isolation_mismatch, "module of namespace \"" + r.namespace_id + "\"");
    if (r.namespace_generation != *e_.namespace_generation)
      return reject(step, RejectionReason::stale_candidate_generation,
                    "module published under generation " + std::to_string(r.namespace_generation.value));
    if (r.semantic_manifest_digest != *e_.semantic_digest)
      return reject(step, RejectionReason::semantic_mismatch, "module semantic ABI (A) differs");
    if (r.layout_manifest_digest != *e_.layout_digest)
      return reject(step, RejectionReason::layout_mismatch, "module layout differs");
    if (r.schema_id != m->schema_id || r.schema_generation != m->schema_generation)
      return reject(step, RejectionReason::module_position_mismatch, "module schema or schema generation (S) differs");
    if (!std::equal(r.token_ids.begin(), r.token_ids.end(), covered.begin(), covered.end()))
      return reject(step, RejectionReason::module_position_mismatch, "module tokens (T) differ");
    if (r.position_ids != m->declared_position_ids)
      return reject(step, RejectionReason::module_position_mismatch,
                    "module positions (Pi) differ from the declared positions");
  } else {
    const auto& s = std::get<SessionIntervalAnswer>(answer);
    if (!session) return mismatch(step, "session interval evidence for a non-session candidate");
    const SessionReuseReceipt& r = s.session;
    if (r.namespace_id != grant_->namespace_name)
      return reject(step, RejectionReason::isolation_mismatch, "session of namespace \"" + r.namespace_id + "\"");
    if (r.namespace_generation != *e_.namespace_generation)
      return reject(step, RejectionReason::stale_candidate_generation,
                    "session saved under generation " + std::to_string(r.namespace_generation.value));
    if (r.semantic_digest != *e_.semantic_digest)
      return reject(step, RejectionReason::semantic_mismatch, "session semantic digest differs");
    if (r.layout_digest != *e_.layout_digest)
      return reject(step, RejectionReason::layout_mismatch, "session layout differs");
    // History is [0, H) exactly (0x0CC), and it is the interval the candidate covers.
    if (r.covered_interval.begin != 0 || r.covered_interval != c.covered_interval)
      return reject(
          step, RejectionReason::session_interval_mismatch,
          "session covers " + interval_text(r.covered_interval) + ", candidate " + interval_text(c.covered_interval));
    if (r.covered_tokens_digest != covered_tokens_digest(covered))
      return reject(step, RejectionReason::session_interval_mismatch, "session history tokens differ");
    if (r.position_truncation_contract != s.position_truncation_contract)
      return reject(step, RejectionReason::session_interval_mismatch, "position/truncation contract differs");
  }
  next_ = ReuseStep::await_mapping;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_await_mapping(const MappingAnswer& m) {
  constexpr ReuseStep step = ReuseStep::await_mapping;
  if (m.required_frontier_tokens < candidate_->covered_interval.end)
    return mismatch(step, "required frontier " + std::to_string(m.required_frontier_tokens) +
                              " is below the reused rows' end " + std::to_string(candidate_->covered_interval.end));
  // L_map = max(0, f_required - f_ready) (0x0CF); positive blocks execution
  // even when the identity is exact and the virtual range is reserved.
  if (const uint64_t lag = mapping_lag(m.required_frontier_tokens, m.ready_frontier_tokens); lag > 0)
    return reject(step, RejectionReason::mapping_frontier_lag, "L_map = " + std::to_string(lag) + " tokens");
  required_frontier_tokens_ = m.required_frontier_tokens;
  e_.ready_frontier_tokens = m.ready_frontier_tokens;
  next_ = ReuseStep::freeze_snapshot;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_freeze_snapshot(const SnapshotAnswer& s) {
  constexpr ReuseStep step = ReuseStep::freeze_snapshot;
  if (s.kernel_abi_id.empty()) return mismatch(step, "a frozen snapshot names its kernel ABI");
  if (s.frozen_version != s.planned_version)
    return reject(step, RejectionReason::stale_snapshot_version,
                  "snapshot " + std::to_string(s.frozen_version.value) + " frozen, plan built against " +
                      std::to_string(s.planned_version.value));
  if (s.kernel_abi_id != s.planned_kernel_abi_id)
    return reject(step, RejectionReason::snapshot_evidence_drift, "kernel ABI differs from the plan's");
  if (s.bound_handles != candidate_->physical_handles || s.bound_interval != candidate_->covered_interval)
    return reject(step, RejectionReason::snapshot_evidence_drift,
                  "snapshot binds other handles or interval than the leased candidate");
  e_.execution_snapshot_version = s.frozen_version;
  kernel_abi_id_ = s.kernel_abi_id;
  receipt_ = build_receipt();
  next_ = ReuseStep::execute;
  return StepOutcome{step, std::nullopt, receipt_, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_execute(const ExecutionAnswer& x) {
  constexpr ReuseStep step = ReuseStep::execute;
  if (x.executed_version != *e_.execution_snapshot_version)
    return mismatch(step, "executed snapshot " + std::to_string(x.executed_version.value) + ", the receipt froze " +
                              std::to_string(e_.execution_snapshot_version->value));
  if (!x.succeeded) return reject(step, RejectionReason::execution_failed, "the executor reported a failure");
  phase_ = ReusePhase::executed;
  next_ = ReuseStep::finish;
  return StepOutcome{step, std::nullopt, std::nullopt, std::nullopt};
}

Result<StepOutcome> ReuseAttempt::step_finish(const CompletionAnswer& answer) {
  constexpr ReuseStep step = ReuseStep::finish;
  const auto& released = std::holds_alternative<LeasesReleased>(answer) ? std::get<LeasesReleased>(answer).released
                                                                        : std::get<SuccessorPublished>(answer).released;
  // Exactly the attempt's leases, each once: anything else leaks or double-releases.
  if (released.size() != leases_.size() ||
      std::set<LeaseId>(released.begin(), released.end()) != std::set<LeaseId>(leases_.begin(), leases_.end()))
    return mismatch(step, "released " + std::to_string(released.size()) + " lease(s); the attempt holds " +
                              std::to_string(leases_.size()) + " distinct ones, which must be released exactly");
  ReuseCompletion done;
  done.released = released;
  if (const auto* p = std::get_if<SuccessorPublished>(&answer)) {
    // One complete COW successor, atomically (0x05C): never a partial one.
    if (!p->all_groups_published) return mismatch(step, "a successor is published for every cache group at once");
    if (p->published_index_version <= read_publication_generation_)
      return mismatch(step, "publication generation " + std::to_string(p->published_index_version) +
                                " does not follow the one read at step 5, " +
                                std::to_string(read_publication_generation_));
    if (p->published_interval.begin > candidate_->covered_interval.begin ||
        p->published_interval.end < candidate_->covered_interval.end)
      return mismatch(step, "successor " + interval_text(p->published_interval) + " does not contain the reused " +
                                interval_text(candidate_->covered_interval));
    done.kind = ReuseCompletionKind::published_successor;
    done.published_index_version = p->published_index_version;
    done.published_interval = p->published_interval;
  }
  completion_ = done;
  phase_ = ReusePhase::completed;
  return StepOutcome{step, std::nullopt, std::nullopt, completion_};
}

}  // namespace kvrt
