#pragma once
// Joint alert predicates of spec 0x0CF ("Counter Families And Alert
// Meaning"), evaluated over two successive counter snapshots. Useful alerts
// are joint predicates, not isolated thresholds:
//
//   allocator exhaustion        free == 0 and evictable == 0 and allocation_failures rising
//   locked-cache pressure       free == 0 and evictable > 0 and locked_eviction_rejects rising
//   reference leak              recorded - derived refcount != 0 after the grace interval
//   mapping stall               required_frontier > ready_frontier and map_wait_age > SLO budget
//   compatibility churn         candidate_matches stable and compatible_matches falling
//   stale receipt race          candidate_matches stable and generation/version rejects rising
//   security boundary pressure  cross_namespace_rejects or stale_namespace_rejects rising
//
// Counters are cumulative (they never decrease); gauges are instantaneous.
// With two snapshots "earlier" and "later" and the window between them, kvrt
// reads the spec's words as follows (the spec gives no formulas):
//   - "X rising" for a counter that is zero on a healthy node (allocation
//     failures under exhaustion, locked-eviction rejects, cross/stale
//     namespace rejects): X increased in the window.
//   - "candidate_matches stable": candidates arrived in the window at a rate
//     within stable_tolerance_percent of their long-run rate up to `earlier`
//     (at_ms counts from when the counters started).
//   - "compatible_matches falling" / "generation/version rejects rising":
//     their share of the window's candidate matches is below / above their
//     long-run share up to `earlier` (these have a healthy non-zero baseline,
//     so any change, not any event, is what matters).
//   - "after grace interval": the delta is non-zero in both snapshots and
//     they are at least reference_leak_grace_ms apart (a transaction in
//     flight may show a transient difference; the caller compares with the
//     snapshot one grace interval old).
// M5.2 owns the SLO budget and the response; these are the facts (0x0CF).
#include <cstdint>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

class ReuseFunnel;

struct CounterSnapshot {
  uint64_t at_ms = 0;  // time since the counters started [ms]

  // Gauges.
  uint64_t free_blocks = 0;               // [blocks]
  uint64_t evictable_blocks = 0;          // [blocks]
  int64_t refcount_delta = 0;             // Delta_ref = recorded - derived [references]
  uint64_t required_frontier_tokens = 0;  // f_required of the oldest waiting mapping [tokens]
  uint64_t ready_frontier_tokens = 0;     // f_ready of that mapping [tokens]
  uint64_t map_wait_age_ms = 0;           // how long that mapping has waited [ms]

  // Cumulative counters [events].
  uint64_t allocation_failures = 0;
  uint64_t locked_eviction_rejects = 0;
  uint64_t candidate_matches = 0;           // N_cand
  uint64_t compatible_matches = 0;          // N_compat
  uint64_t generation_version_rejects = 0;  // stale_generation + stale_snapshot buckets
  uint64_t cross_namespace_rejects = 0;
  uint64_t stale_namespace_rejects = 0;
};

// Copies the funnel's counters into a snapshot (gauges untouched).
void fill_funnel_counters(const ReuseFunnel& funnel, CounterSnapshot& out);

struct AlertPolicy {
  uint64_t reference_leak_grace_ms = 30'000;  // [ms]
  uint64_t map_wait_slo_budget_ms = 50;       // M5.2's budget [ms]
  uint32_t stable_tolerance_percent = 20;     // "stable": window rate within this of the long-run rate
};

enum class Alert : uint8_t {
  allocator_exhaustion = 0,
  locked_cache_pressure = 1,
  reference_leak = 2,
  mapping_stall = 3,
  compatibility_churn = 4,
  stale_receipt_race = 5,
  security_boundary_pressure = 6,
};
inline constexpr size_t kAlertCount = 7;
std::string_view to_string(Alert a);

// The alerts that hold for the window (earlier, later], in enum order.
// ErrorCode::telemetry_counter_regression if `later` is not later, or a
// cumulative counter went backwards (field names it).
Result<std::vector<Alert>> evaluate_alerts(const CounterSnapshot& earlier, const CounterSnapshot& later,
                                           const AlertPolicy& policy);

}  // namespace kvrt
