// ReuseAttempt::validate(): the attempt's invariants re-derived from its
// state (docs/conventions.md habit 2).
#include <algorithm>
#include <set>
#include <string>

#include "services/reuse/reuse_attempt.hpp"

namespace kvrt {
namespace {

Error broken(std::string reason) {
  return make_error(ErrorCode::invariant_violated, std::move(reason), "reuse_attempt");
}

}  // namespace

Status ReuseAttempt::validate() const {
  const int next = static_cast<int>(next_);
  if (next < 1 || next > kReuseStepCount) return broken("next step out of range");
  // The evidence present is exactly what the passed steps own.
  auto passed = [&](ReuseStep s) { return next > static_cast<int>(s); };
  if (grant_.has_value() != passed(ReuseStep::authorize) ||
      e_.namespace_generation.has_value() != passed(ReuseStep::authorize))
    return broken("grant / g_ns present iff step 1 passed");
  if (e_.semantic_digest.has_value() != passed(ReuseStep::build_key) ||
      e_.layout_digest.has_value() != passed(ReuseStep::build_key))
    return broken("d_sem / d_layout present iff step 2 passed");
  if (candidate_.has_value() != passed(ReuseStep::lookup_candidate) ||
      e_.index_version.has_value() != passed(ReuseStep::lookup_candidate) ||
      e_.tree_version.has_value() != passed(ReuseStep::lookup_candidate))
    return broken("candidate / v_index / v_tree present iff step 3 passed");
  if (leases_.empty() == passed(ReuseStep::acquire_leases)) return broken("leases held iff step 4 passed");
  if (e_.ready_frontier_tokens.has_value() != passed(ReuseStep::await_mapping) ||
      required_frontier_tokens_.has_value() != passed(ReuseStep::await_mapping))
    return broken("f_map present iff step 7 passed");
  if (e_.execution_snapshot_version.has_value() != passed(ReuseStep::freeze_snapshot) ||
      receipt_.has_value() != passed(ReuseStep::freeze_snapshot))
    return broken("v_exec / receipt present iff step 8 passed");

  // Phase agrees with the step reached.
  const bool executed = phase_ == ReusePhase::executed || phase_ == ReusePhase::completed;
  if (executed != (next_ == ReuseStep::finish)) return broken("executed exactly when step 10 is next");
  if ((phase_ == ReusePhase::completed) != completion_.has_value()) return broken("completion iff completed");
  if ((phase_ == ReusePhase::rejected) != rejection_.has_value()) return broken("rejection iff rejected");
  if (rejection_) {
    if (rejection_->step != next_) return broken("the rejected step is the step the attempt stopped at");
    const std::vector<LeaseId>& release = rejection_->leases_to_release;
    if (release.size() < leases_.size() || !std::equal(leases_.begin(), leases_.end(), release.begin()))
      return broken("a rejection releases every lease the attempt holds");
  }

  // E is mutually consistent.
  if (grant_ && *e_.namespace_generation != grant_->generation) return broken("g_ns is not the grant's generation");
  if (candidate_) {
    const ReuseCandidate& c = *candidate_;
    if (c.namespace_name != grant_->namespace_name || c.namespace_generation != *e_.namespace_generation)
      return broken("candidate namespace or generation differs from the grant");
    if (c.semantic_digest != *e_.semantic_digest || c.layout_digest != *e_.layout_digest)
      return broken("candidate digests differ from d_sem / d_layout");
    if (c.index_version != *e_.index_version || c.tree_version != *e_.tree_version ||
        c.pool_generations != e_.pool_generations)
      return broken("v_index / v_tree / g_pool differ from the candidate's");
    if (c.covered_interval.end > token_ids_.size() || c.covered_interval.begin >= c.covered_interval.end)
      return broken("candidate interval outside the request");
    if (request_.require_collision_witness && !witness_verified_) return broken("required witness not verified");
  }
  if (required_frontier_tokens_) {
    if (*e_.ready_frontier_tokens < *required_frontier_tokens_) return broken("f_map below f_required");
    if (*required_frontier_tokens_ < candidate_->covered_interval.end) return broken("f_required below reused rows");
  }
  if (receipt_ && !(*receipt_ == build_receipt())) return broken("receipt differs from the evidence it binds");
  if (completion_) {
    const std::set<LeaseId> released(completion_->released.begin(), completion_->released.end());
    if (released != std::set<LeaseId>(leases_.begin(), leases_.end()))
      return broken("completion released other leases");
  }
  return Status::success();
}

}  // namespace kvrt
