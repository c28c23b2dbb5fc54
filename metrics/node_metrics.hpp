#pragma once
// The node's metric families (docs/operations.md "Metrics" lists each with
// its unit and meaning), rendered from what a scrape reads: the owners'
// cheap statistics (never their validate()), the receipt latency
// histograms and the live alert evaluation. The KV event publisher's
// counters come with the node's own values (kv_events_*). Names follow vLLM's where the concept is the same (the usage
// ratio; prefix-cache queries and hits counted in tokens, so that
// rate(hits) / rate(queries) is the token hit rate) and kvrt's own beyond.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metrics/node_alert_monitor.hpp"
#include "metrics/route_latency.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"

namespace kvrt::metrics {

// What does not change while a node runs.
struct NodeMetricsFacts {
  uint64_t row_bytes = 0;     // B_row summed over the cache groups [bytes / token] (0x02A)
  uint32_t cache_groups = 0;  // pages of the radix tree hold one block per group
};

struct NodeMetricsSources {
  const std::vector<OwnerStats>* owners = nullptr;  // required
  const RouteLatency* latency = nullptr;            // null: no latency families
  const AlertEvaluation* alerts = nullptr;          // null: no alert families
  double uptime_seconds = 0;
  NodeMetricsFacts facts;
};

// The whole exposition. Errors: whatever the exposition refuses (a label
// that fails 0x0CE hygiene, a malformed family): the scrape then fails
// visibly instead of publishing a partial or unsafe page.
Result<std::string> render_node_metrics(const NodeMetricsSources& sources);

}  // namespace kvrt::metrics
