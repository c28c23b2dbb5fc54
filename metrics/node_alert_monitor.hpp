#pragma once
// The seven joint alerts of 0x0CF, evaluated live: the node samples its
// owners' cheap counters at a steady interval ([metrics] alert_interval_ms)
// and evaluates the predicates (services/telemetry/alert_predicates.hpp)
// over the window that ends at the newest sample and starts at the newest
// sample at least alert_window_ms older (the oldest one while the node is
// younger than the window). The reference-leak predicate needs its two
// snapshots a grace interval apart, so samples are kept for the longer of
// the window and the grace interval.
//
// The map-wait age of the mapping-stall predicate is measured here: how
// long the mapping lag (L_map) has stayed positive in consecutive samples.
#include <array>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "schema/session_types.hpp"
#include "services/common/result.hpp"
#include "services/telemetry/alert_predicates.hpp"

namespace kvrt::metrics {

// The alert inputs of a node's statistics (the owners' values as `kvrt
// stats` reports them, summed over trust domains). at_ms and map_wait_age_ms
// are the caller's.
//   free / evictable      every pool's, over the allocator's pools; the
//                         node cache's leased blocks count as evictable
//                         (the radix owner's pressure relief frees them)
//   allocation_failures   allocations refused for capacity
//   locked_eviction_rejects  of those, refused while the node's cache held leases
//   candidate / compatible   funnel stages N_cand and N_compat (0x0CF)
//   generation_version, cross_namespace, stale_namespace rejects: funnel reasons
CounterSnapshot counter_snapshot(const std::vector<OwnerStats>& owners, uint64_t at_ms);

struct AlertEvaluation {
  bool evaluated = false;  // two samples exist
  std::array<bool, kAlertCount> active{};
  CounterSnapshot earlier, later;  // the window's ends
};

class NodeAlertMonitor {
 public:
  NodeAlertMonitor(AlertPolicy policy, uint64_t window_ms);

  // Adds the newest sample (at_ms later than the last one; map_wait_age_ms
  // is filled here) and re-evaluates. Errors: telemetry_counter_regression
  // from evaluate_alerts (a counter went back: an owner restarted?); the
  // sample is then dropped and the last evaluation stays.
  Status observe(CounterSnapshot sample);
  AlertEvaluation current() const;

 private:
  AlertPolicy policy_;
  uint64_t window_ms_;
  mutable std::mutex mutex_;
  std::deque<CounterSnapshot> samples_;
  std::optional<uint64_t> lag_since_ms_;  // when the mapping lag turned positive
  AlertEvaluation current_;
};

}  // namespace kvrt::metrics
