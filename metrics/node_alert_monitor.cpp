#include "metrics/node_alert_monitor.hpp"

#include <algorithm>
#include <string>

#include "metrics/owner_values.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"

namespace kvrt::metrics {

CounterSnapshot counter_snapshot(const std::vector<OwnerStats>& owners, uint64_t at_ms) {
  const OwnerValues v(owners);
  CounterSnapshot s;
  s.at_ms = at_ms;
  for (uint32_t g = 0; v.has("allocator", "pool" + std::to_string(g) + "_capacity_blocks"); ++g) {
    const std::string p = "pool" + std::to_string(g) + "_";
    s.free_blocks += v.count("allocator", p + "free_blocks");
    s.evictable_blocks += v.count("allocator", p + "evictable_blocks");
  }
  s.evictable_blocks += v.count("allocator", "node_leases");
  s.refcount_delta = v("allocator", "refcount_delta");
  s.required_frontier_tokens = v.count("mapper", "mapping_lag_tokens");
  s.ready_frontier_tokens = 0;  // only the difference is reported (the worst slot's L_map)
  s.allocation_failures = v.count("allocator", "out_of_capacity");
  s.locked_eviction_rejects = v.count("allocator", "locked_eviction_rejects");
  const NodeReuseFunnel f = node_reuse_funnel(owners);
  for (size_t r = 0; r < kRejectionReasonCount; ++r) {
    const auto reason = static_cast<RejectionReason>(r);
    if (is_generation_or_version(reason)) s.generation_version_rejects += f.rejections[r];
    if (is_cross_namespace(reason)) s.cross_namespace_rejects += f.rejections[r];
    if (is_stale_namespace(reason)) s.stale_namespace_rejects += f.rejections[r];
  }
  s.candidate_matches = f.candidates;
  s.compatible_matches = f.compatible();
  return s;
}

NodeAlertMonitor::NodeAlertMonitor(AlertPolicy policy, uint64_t window_ms) : policy_(policy), window_ms_(window_ms) {}

Status NodeAlertMonitor::observe(CounterSnapshot sample) {
  std::lock_guard lock(mutex_);
  // Against the last sample as well as the window's start: a counter that
  // went back since the last sample but not below the window's start is
  // still a regression.
  if (!samples_.empty())
    if (Result<std::vector<Alert>> step = evaluate_alerts(samples_.back(), sample, policy_); !step.ok())
      return step.error();
  const uint64_t lag = sample.required_frontier_tokens > sample.ready_frontier_tokens
                           ? sample.required_frontier_tokens - sample.ready_frontier_tokens
                           : 0;
  if (lag == 0)
    lag_since_ms_.reset();
  else if (!lag_since_ms_)
    lag_since_ms_ = sample.at_ms;
  sample.map_wait_age_ms = lag_since_ms_ ? sample.at_ms - *lag_since_ms_ : 0;

  // The newest sample at least `span` older than `sample`, else the oldest.
  const auto start_of = [&](uint64_t span) -> const CounterSnapshot* {
    const CounterSnapshot* found = samples_.empty() ? nullptr : &samples_.front();
    for (const CounterSnapshot& s : samples_)
      if (s.at_ms + span <= sample.at_ms) found = &s;
    return found;
  };
  AlertEvaluation next;
  next.later = sample;
  if (const CounterSnapshot* earlier = start_of(window_ms_)) {
    Result<std::vector<Alert>> window = evaluate_alerts(*earlier, sample, policy_);
    if (!window.ok()) return window.error();
    const CounterSnapshot* grace = start_of(policy_.reference_leak_grace_ms);
    Result<std::vector<Alert>> leak = evaluate_alerts(*grace, sample, policy_);
    if (!leak.ok()) return leak.error();
    next.evaluated = true;
    next.earlier = *earlier;
    for (Alert a : *window)
      if (a != Alert::reference_leak) next.active[static_cast<size_t>(a)] = true;
    for (Alert a : *leak)
      if (a == Alert::reference_leak) next.active[static_cast<size_t>(a)] = true;
  }
  samples_.push_back(sample);
  const uint64_t keep = std::max(window_ms_, policy_.reference_leak_grace_ms);
  // Drop samples no future window can start at: keep the newest one at
  // least `keep` old, and everything after it.
  while (samples_.size() > 2 && samples_[1].at_ms + keep <= sample.at_ms) samples_.pop_front();
  current_ = next;
  return Status::success();
}

AlertEvaluation NodeAlertMonitor::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

}  // namespace kvrt::metrics
