// The node's live alert evaluation: the window it chooses (checked against
// a brute-force choice over every sample ever seen, so that dropping old
// samples never changes an answer), the map-wait age it measures, and the
// snapshot it reads from owner statistics (checked against hand-built
// stats).
#include "metrics/node_alert_monitor.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

namespace kvrt::metrics {
namespace {

StatValue v(std::string name, int64_t value) { return StatValue{std::move(name), value}; }

}  // namespace

TEST_CASE("the live alerts equal evaluate_alerts over the window a brute-force search picks", "[metrics][alerts]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AlertPolicy policy;
  policy.reference_leak_grace_ms = 40 + rng() % 200;
  policy.map_wait_slo_budget_ms = 5 + rng() % 40;
  const uint64_t window = 20 + rng() % 300;
  NodeAlertMonitor monitor(policy, window);
  std::vector<CounterSnapshot> all;
  CounterSnapshot s;
  std::optional<uint64_t> lag_since;
  for (int i = 0; i < 3000; ++i) {
    s.at_ms += 1 + rng() % 30;
    // Gauges wander, counters rise in bursts: every predicate turns on and off.
    s.free_blocks = rng() % 3 == 0 ? 0 : rng() % 5;
    s.evictable_blocks = rng() % 2 == 0 ? 0 : rng() % 4;
    s.refcount_delta = rng() % 4 == 0 ? static_cast<int64_t>(rng() % 3) - 1 : s.refcount_delta;
    s.required_frontier_tokens = rng() % 5 == 0 ? 0 : (rng() % 3 == 0 ? 16 : s.required_frontier_tokens);
    s.ready_frontier_tokens = 0;
    s.allocation_failures += rng() % 4 == 0 ? rng() % 3 : 0;
    s.locked_eviction_rejects += rng() % 6 == 0 ? 1 : 0;
    const uint64_t cand = rng() % 10;
    s.candidate_matches += cand;
    s.compatible_matches += cand - (rng() % 3 == 0 ? cand / 2 : 0);
    s.generation_version_rejects += rng() % 5 == 0 ? 1 : 0;
    s.cross_namespace_rejects += rng() % 40 == 0 ? 1 : 0;
    s.stale_namespace_rejects += rng() % 50 == 0 ? 1 : 0;
    REQUIRE(monitor.observe(s).ok());

    // The reference: the age of the lag, and the windows' starts over every sample.
    CounterSnapshot later = s;
    if (later.required_frontier_tokens == 0)
      lag_since.reset();
    else if (!lag_since)
      lag_since = later.at_ms;
    later.map_wait_age_ms = lag_since ? later.at_ms - *lag_since : 0;
    const auto start_of = [&](uint64_t span) -> const CounterSnapshot* {
      const CounterSnapshot* found = all.empty() ? nullptr : &all.front();
      for (const CounterSnapshot& x : all)
        if (x.at_ms + span <= later.at_ms) found = &x;
      return found;
    };
    const AlertEvaluation got = monitor.current();
    CHECK(got.later.map_wait_age_ms == later.map_wait_age_ms);
    const CounterSnapshot* earlier = start_of(window);
    REQUIRE(got.evaluated == (earlier != nullptr));
    if (earlier) {
      std::array<bool, kAlertCount> expected{};
      const Result<std::vector<Alert>> in_window = evaluate_alerts(*earlier, later, policy);
      const Result<std::vector<Alert>> in_grace =
          evaluate_alerts(*start_of(policy.reference_leak_grace_ms), later, policy);
      REQUIRE(in_window.ok());
      REQUIRE(in_grace.ok());
      for (size_t k = 0; k < in_window->size(); ++k)
        if ((*in_window)[k] != Alert::reference_leak) expected[static_cast<size_t>((*in_window)[k])] = true;
      for (size_t k = 0; k < in_grace->size(); ++k)
        if ((*in_grace)[k] == Alert::reference_leak) expected[static_cast<size_t>((*in_grace)[k])] = true;
      INFO("sample " << i << " at " << later.at_ms << " ms");
      CHECK(got.earlier.at_ms == earlier->at_ms);
      CHECK(got.active == expected);
    }
    all.push_back(later);
  }
}

TEST_CASE("a sample that is not later, or a counter that goes back, is refused and changes nothing",
          "[metrics][alerts]") {
  NodeAlertMonitor monitor(AlertPolicy{}, 100);
  CounterSnapshot a;
  a.at_ms = 10;
  a.allocation_failures = 5;
  REQUIRE(monitor.observe(a).ok());
  CounterSnapshot b = a;
  b.at_ms = 50;
  b.allocation_failures = 7;
  REQUIRE(monitor.observe(b).ok());
  const AlertEvaluation before = monitor.current();
  CounterSnapshot same = b;
  CHECK(monitor.observe(same).error().code == ErrorCode::telemetry_counter_regression);
  CounterSnapshot back = b;
  back.at_ms = 60;
  back.allocation_failures = 6;
  CHECK(monitor.observe(back).error().code == ErrorCode::telemetry_counter_regression);
  CHECK(monitor.current().later.at_ms == before.later.at_ms);
  CHECK(monitor.current().active == before.active);
}

TEST_CASE("the alert inputs are read from owner statistics summed over trust domains", "[metrics][alerts]") {
  std::vector<OwnerStats> owners(4);
  owners[0].owner = "allocator@tenant-a";
  owners[0].values = {v("pool0_capacity_blocks", 10),
                      v("pool0_free_blocks", 2),
                      v("pool0_evictable_blocks", 1),
                      v("pool1_capacity_blocks", 10),
                      v("pool1_free_blocks", 3),
                      v("pool1_evictable_blocks", 0),
                      v("node_leases", 4),
                      v("refcount_delta", 1),
                      v("out_of_capacity", 7),
                      v("locked_eviction_rejects", 2)};
  owners[1].owner = "allocator@tenant-b";
  owners[1].values = {v("pool0_capacity_blocks", 10), v("pool0_free_blocks", 5), v("out_of_capacity", 1)};
  owners[2].owner = "mapper";
  owners[2].values = {v("mapping_lag_tokens", 16)};
  owners[3].owner = "node";
  owners[3].values = {v("reuse_refused_namespace_denied", 3), v("reuse_refused_stale_namespace_generation", 2)};
  const CounterSnapshot s = counter_snapshot(owners, 1234);
  CHECK(s.at_ms == 1234);
  CHECK(s.free_blocks == 2 + 3 + 5);
  CHECK(s.evictable_blocks == 1 + 4);
  CHECK(s.refcount_delta == 1);
  CHECK(s.allocation_failures == 8);
  CHECK(s.locked_eviction_rejects == 2);
  CHECK(s.required_frontier_tokens - s.ready_frontier_tokens == 16);
  CHECK(s.cross_namespace_rejects == 3);
  CHECK(s.stale_namespace_rejects == 2);
}

}  // namespace kvrt::metrics
