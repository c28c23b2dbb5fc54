// Joint alert predicates of spec 0x0CF over two successive counter snapshots.
#include <algorithm>
#include <catch2/catch.hpp>

#include "services/telemetry/alert_predicates.hpp"
#include "services/telemetry/reuse_funnel.hpp"

using namespace kvrt;

namespace {

// A healthy node after 100 s: 1000 candidates (10 per second), 900
// compatible, 20 generation/version rejects, free blocks available.
CounterSnapshot healthy_baseline() {
  CounterSnapshot s;
  s.at_ms = 100'000;
  s.free_blocks = 40;
  s.evictable_blocks = 12;
  s.candidate_matches = 1000;
  s.compatible_matches = 900;
  s.generation_version_rejects = 20;
  return s;
}

// Ten seconds later at the same rates and shares.
CounterSnapshot healthy_next(const CounterSnapshot& e) {
  CounterSnapshot s = e;
  s.at_ms = e.at_ms + 10'000;
  s.candidate_matches += 100;
  s.compatible_matches += 90;
  s.generation_version_rejects += 2;
  return s;
}

std::vector<Alert> alerts(const CounterSnapshot& e, const CounterSnapshot& l, AlertPolicy policy = {}) {
  auto r = evaluate_alerts(e, l, policy);
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  return *r;
}

bool has(const std::vector<Alert>& v, Alert a) { return std::find(v.begin(), v.end(), a) != v.end(); }

}  // namespace

TEST_CASE("a healthy window raises no alert", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CHECK(alerts(e, healthy_next(e)).empty());
}

TEST_CASE("allocator exhaustion and locked-cache pressure are told apart by evictable", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);
  l.free_blocks = 0;
  l.evictable_blocks = 0;
  l.allocation_failures = 5;
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::allocator_exhaustion});
  l.evictable_blocks = 7;  // capacity exists but is locked
  CHECK(alerts(e, l).empty());
  l.locked_eviction_rejects = 3;
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::locked_cache_pressure});
  l.free_blocks = 1;  // not a pressure state: free capacity remains
  CHECK(alerts(e, l).empty());
}

TEST_CASE("a reference leak needs a nonzero delta across the grace interval", "[telemetry][alerts]") {
  CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);  // 10 s apart
  e.refcount_delta = 2;
  l.refcount_delta = 2;
  AlertPolicy p;
  p.reference_leak_grace_ms = 30'000;
  CHECK_FALSE(has(alerts(e, l, p), Alert::reference_leak));
  p.reference_leak_grace_ms = 10'000;
  CHECK(has(alerts(e, l, p), Alert::reference_leak));
  l.refcount_delta = 0;  // a transient difference that resolved
  CHECK_FALSE(has(alerts(e, l, p), Alert::reference_leak));
}

TEST_CASE("a mapping stall needs lag and a wait beyond the SLO budget", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);
  l.required_frontier_tokens = 4096;
  l.ready_frontier_tokens = 4080;
  l.map_wait_age_ms = 50;
  CHECK(alerts(e, l).empty());  // within budget (50 ms)
  l.map_wait_age_ms = 51;
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::mapping_stall});
  l.ready_frontier_tokens = 4096;
  CHECK(alerts(e, l).empty());
}

TEST_CASE("compatibility churn and stale receipt races need stable candidate traffic", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);
  l.compatible_matches = e.compatible_matches + 60;  // 60 % compatible in the window vs 90 % before
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::compatibility_churn});
  l = healthy_next(e);
  l.generation_version_rejects = e.generation_version_rejects + 15;  // 15 % vs 2 %
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::stale_receipt_race});
  // The same shares with candidate traffic collapsing: the workload changed,
  // which is not the contract these alerts name.
  l = healthy_next(e);
  l.candidate_matches = e.candidate_matches + 20;
  l.compatible_matches = e.compatible_matches + 2;
  CHECK(alerts(e, l).empty());
}

TEST_CASE("security boundary pressure: any cross or stale namespace reject", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);
  l.cross_namespace_rejects = 1;
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::security_boundary_pressure});
  l = healthy_next(e);
  l.stale_namespace_rejects = 1;
  CHECK(alerts(e, l) == std::vector<Alert>{Alert::security_boundary_pressure});
}

TEST_CASE("snapshots must move forward", "[telemetry][alerts]") {
  const CounterSnapshot e = healthy_baseline();
  CounterSnapshot l = healthy_next(e);
  CHECK(evaluate_alerts(l, e, {}).error().field == "at_ms");
  l.candidate_matches = e.candidate_matches - 1;
  CHECK(evaluate_alerts(e, l, {}).error().code == ErrorCode::telemetry_counter_regression);
  CHECK(evaluate_alerts(e, l, {}).error().field == "candidate_matches");
}

TEST_CASE("the funnel fills the reuse counters of a snapshot", "[telemetry][alerts]") {
  ReuseFunnel f;
  f.record(FunnelOutcome::rejected(RejectionReason::namespace_denied));
  f.record(FunnelOutcome::rejected(RejectionReason::stale_namespace_generation));
  f.record(FunnelOutcome::rejected(RejectionReason::stale_tree_version));
  f.record(FunnelOutcome::rejected(RejectionReason::stale_snapshot_version));
  f.record(FunnelOutcome::rejected(RejectionReason::semantic_mismatch));
  f.record(FunnelOutcome::hit());
  CounterSnapshot s;
  fill_funnel_counters(f, s);
  CHECK(s.candidate_matches == 4);
  CHECK(s.compatible_matches == 3);
  CHECK(s.generation_version_rejects == 2);
  CHECK(s.cross_namespace_rejects == 1);
  CHECK(s.stale_namespace_rejects == 1);
}
