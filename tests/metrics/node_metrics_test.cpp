// The node's families rendered from hand-built owner statistics: the views
// sum trust domains, the usage ratio and partition residual are derived as
// documented, every value stays reachable by owner under kvrt_owner_stat,
// and a stat name that breaks label hygiene fails the whole scrape rather
// than publish it.
#include "metrics/node_metrics.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kvrt::metrics {
namespace {

StatValue v(std::string name, int64_t value) { return StatValue{std::move(name), value}; }

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

std::vector<OwnerStats> two_domains() {
  std::vector<OwnerStats> owners(3);
  owners[0].owner = "allocator@a";
  owners[0].values = {v("pool0_capacity_blocks", 8),       v("pool0_free_blocks", 2),
                      v("pool0_evictable_blocks", 1),      v("pool0_live_blocks", 4),
                      v("pool0_in_transaction_blocks", 1), v("live_valid_rows", 40),
                      v("live_allocated_rows", 64),        v("partial_tail_rows_copied", 3)};
  owners[1].owner = "allocator@b";
  owners[1].values = {v("pool0_capacity_blocks", 8),       v("pool0_free_blocks", 8),
                      v("pool0_evictable_blocks", 0),      v("pool0_live_blocks", 0),
                      v("pool0_in_transaction_blocks", 0), v("live_valid_rows", 0),
                      v("live_allocated_rows", 16)};
  owners[2].owner = "node";
  owners[2].values = {v("workers_connected", 3), v("kv_events_published", 11)};
  return owners;
}

}  // namespace

TEST_CASE("node families sum the trust domains and derive usage, residual and efficiency", "[metrics]") {
  const std::vector<OwnerStats> owners = two_domains();
  RouteLatency latency;
  latency.record(1, std::chrono::microseconds(30));
  NodeMetricsSources sources;
  sources.owners = &owners;
  sources.latency = &latency;
  sources.facts = NodeMetricsFacts{1024, 1};
  const Result<std::string> text = render_node_metrics(sources);
  REQUIRE(text.ok());
  const std::string& t = *text;
  CHECK(has_line(t, "kvrt_pool_capacity_blocks{pool=\"0\"} 16"));
  CHECK(has_line(t, "kvrt_pool_blocks{pool=\"0\",state=\"free\"} 10"));
  CHECK(has_line(t, "kvrt_pool_blocks{pool=\"0\",state=\"live\"} 4"));
  // (16 - 10 free - 1 evictable) / 16
  CHECK(has_line(t, "kvrt_kv_cache_usage_ratio{pool=\"0\"} 0.3125"));
  CHECK(has_line(t, "kvrt_pool_partition_residual_blocks{pool=\"0\"} 0"));
  CHECK(has_line(t, "kvrt_kv_memory_efficiency_ratio 0.5"));  // 40 / 80
  CHECK(has_line(t, "kvrt_cow_copied_bytes_total 3072"));     // 3 rows x 1024 B
  CHECK(has_line(t, "kvrt_workers_connected 3"));
  CHECK(has_line(t, "kvrt_kv_events_published_total 11"));
  CHECK(has_line(t, "kvrt_receipt_latency_seconds_count{owner=\"allocator\",route=\"allocator\"} 1"));
  CHECK(has_line(t, "kvrt_receipt_latency_seconds_bucket{owner=\"allocator\",route=\"allocator\",le=\"2.5e-05\"} 0"));
  CHECK(has_line(t, "kvrt_receipt_latency_seconds_bucket{owner=\"allocator\",route=\"allocator\",le=\"5e-05\"} 1"));
  CHECK(has_line(t, "kvrt_owner_stat{owner=\"allocator@b\",name=\"pool0_free_blocks\"} 8"));
  // No alert evaluation given: no alert families.
  CHECK(t.find("kvrt_alert_active") == std::string::npos);
}

TEST_CASE("a partition that does not balance shows as a residual", "[metrics]") {
  std::vector<OwnerStats> owners = two_domains();
  owners[1].values[1].value = 7;  // one block of domain b in no state
  NodeMetricsSources sources;
  sources.owners = &owners;
  CHECK(has_line(render_node_metrics(sources).value(), "kvrt_pool_partition_residual_blocks{pool=\"0\"} 1"));
}

TEST_CASE("a statistic whose name breaks label hygiene fails the scrape instead of leaking", "[metrics]") {
  std::vector<OwnerStats> owners = two_domains();
  owners[2].values.push_back(v("prompt was: tell me a secret", 1));
  NodeMetricsSources sources;
  sources.owners = &owners;
  const Result<std::string> text = render_node_metrics(sources);
  REQUIRE_FALSE(text.ok());
  CHECK(text.error().code == ErrorCode::telemetry_forbidden_label);
  CHECK(text.error().describe().find("secret") == std::string::npos);
}

TEST_CASE("the alert families show each alert as 0/1 with its inputs", "[metrics][alerts]") {
  const std::vector<OwnerStats> owners = two_domains();
  AlertEvaluation a;
  a.evaluated = true;
  a.earlier.at_ms = 1000;
  a.later.at_ms = 4000;
  a.earlier.allocation_failures = 2;
  a.later.allocation_failures = 9;
  a.active[static_cast<size_t>(Alert::allocator_exhaustion)] = true;
  NodeMetricsSources sources;
  sources.owners = &owners;
  sources.alerts = &a;
  const std::string t = render_node_metrics(sources).value();
  CHECK(has_line(t, "kvrt_alert_window_seconds 3"));
  CHECK(has_line(t, "kvrt_alert_active{alert=\"allocator_exhaustion\"} 1"));
  CHECK(has_line(t, "kvrt_alert_active{alert=\"reference_leak\"} 0"));
  CHECK(has_line(t, "kvrt_alert_input{alert=\"allocator_exhaustion\",input=\"allocation_failures_increase\"} 7"));
}

}  // namespace kvrt::metrics
