#include "services/telemetry/alert_predicates.hpp"

#include <string>

#include "services/telemetry/reuse_funnel.hpp"

namespace kvrt {
namespace {

using u128 = unsigned __int128;

Status check_monotone(uint64_t earlier, uint64_t later, const char* field) {
  if (later < earlier)
    return make_error(ErrorCode::telemetry_counter_regression,
                      std::string(field) + " went from " + std::to_string(earlier) + " to " + std::to_string(later),
                      field);
  return Status::success();
}

// Window rate d/window within tol% of the long-run rate total/elapsed, by
// exact cross-multiplication: |d * elapsed - total * window| * 100 <= tol * total * window.
bool rate_stable(uint64_t d, uint64_t window, uint64_t total, uint64_t elapsed, uint32_t tol) {
  if (d == 0 || total == 0 || elapsed == 0) return false;
  const u128 a = u128{d} * elapsed, b = u128{total} * window;
  const u128 diff = a > b ? a - b : b - a;
  return diff * 100 <= u128{tol} * b;
}

// part_w / all_w compared with part / all, exact: sign of part_w * all - part * all_w.
int share_change(uint64_t part_w, uint64_t all_w, uint64_t part, uint64_t all) {
  const u128 a = u128{part_w} * all, b = u128{part} * all_w;
  return a < b ? -1 : (a > b ? 1 : 0);
}

}  // namespace

std::string_view to_string(Alert a) {
  switch (a) {
    case Alert::allocator_exhaustion:
      return "allocator_exhaustion";
    case Alert::locked_cache_pressure:
      return "locked_cache_pressure";
    case Alert::reference_leak:
      return "reference_leak";
    case Alert::mapping_stall:
      return "mapping_stall";
    case Alert::compatibility_churn:
      return "compatibility_churn";
    case Alert::stale_receipt_race:
      return "stale_receipt_race";
    case Alert::security_boundary_pressure:
      return "security_boundary_pressure";
  }
  return "unknown_alert";
}

void fill_funnel_counters(const ReuseFunnel& funnel, CounterSnapshot& out) {
  const FunnelCounts c = funnel.counts();
  out.candidate_matches = c.at(FunnelStage::candidates);
  out.compatible_matches = c.at(FunnelStage::compatible);
  out.generation_version_rejects = funnel.generation_version_rejects();
  out.cross_namespace_rejects = funnel.cross_namespace_rejects();
  out.stale_namespace_rejects = funnel.stale_namespace_rejects();
}

Result<std::vector<Alert>> evaluate_alerts(const CounterSnapshot& e, const CounterSnapshot& l,
                                           const AlertPolicy& policy) {
  if (l.at_ms <= e.at_ms)
    return make_error(
        ErrorCode::telemetry_counter_regression,
        "later snapshot at " + std::to_string(l.at_ms) + " ms is not after " + std::to_string(e.at_ms) + " ms",
        "at_ms");
  KVRT_TRY(check_monotone(e.allocation_failures, l.allocation_failures, "allocation_failures"));
  KVRT_TRY(check_monotone(e.locked_eviction_rejects, l.locked_eviction_rejects, "locked_eviction_rejects"));
  KVRT_TRY(check_monotone(e.candidate_matches, l.candidate_matches, "candidate_matches"));
  KVRT_TRY(check_monotone(e.compatible_matches, l.compatible_matches, "compatible_matches"));
  KVRT_TRY(check_monotone(e.generation_version_rejects, l.generation_version_rejects, "generation_version_rejects"));
  KVRT_TRY(check_monotone(e.cross_namespace_rejects, l.cross_namespace_rejects, "cross_namespace_rejects"));
  KVRT_TRY(check_monotone(e.stale_namespace_rejects, l.stale_namespace_rejects, "stale_namespace_rejects"));

  const uint64_t window = l.at_ms - e.at_ms;
  const uint64_t d_cand = l.candidate_matches - e.candidate_matches;
  const bool candidates_stable =
      rate_stable(d_cand, window, e.candidate_matches, e.at_ms, policy.stable_tolerance_percent);

  std::vector<Alert> out;
  if (l.free_blocks == 0 && l.evictable_blocks == 0 && l.allocation_failures > e.allocation_failures)
    out.push_back(Alert::allocator_exhaustion);
  if (l.free_blocks == 0 && l.evictable_blocks > 0 && l.locked_eviction_rejects > e.locked_eviction_rejects)
    out.push_back(Alert::locked_cache_pressure);
  if (e.refcount_delta != 0 && l.refcount_delta != 0 && window >= policy.reference_leak_grace_ms)
    out.push_back(Alert::reference_leak);
  if (l.required_frontier_tokens > l.ready_frontier_tokens && l.map_wait_age_ms > policy.map_wait_slo_budget_ms)
    out.push_back(Alert::mapping_stall);
  if (candidates_stable &&
      share_change(l.compatible_matches - e.compatible_matches, d_cand, e.compatible_matches, e.candidate_matches) < 0)
    out.push_back(Alert::compatibility_churn);
  if (candidates_stable && share_change(l.generation_version_rejects - e.generation_version_rejects, d_cand,
                                        e.generation_version_rejects, e.candidate_matches) > 0)
    out.push_back(Alert::stale_receipt_race);
  if (l.cross_namespace_rejects > e.cross_namespace_rejects || l.stale_namespace_rejects > e.stale_namespace_rejects)
    out.push_back(Alert::security_boundary_pressure);
  return out;
}

}  // namespace kvrt
