#pragma once
// What `kvrt top` and `kvrt stats --watch` show of a node: a view computed
// from two successive reads of its statistics (and of its scrape, for the
// receipt latency per route), so that rates and hit ratios are those of the
// interval between them, beside the node's cumulative counters.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/client.hpp"
#include "tools/watch/scraped_latency.hpp"

namespace kvrt::watch {

struct NodeViewSample {
  double t_s = 0;        // steady time of the read [s]
  std::string wall_utc;  // "2026-12-06T02:21:00Z"
  NodeStats stats;
  std::optional<RouteHistograms> latency;  // nullopt: the node serves no /metrics
};

struct PoolView {
  uint32_t pool = 0;
  int64_t capacity = 0, free = 0, evictable = 0, live = 0, in_transaction = 0;  // [blocks]
  double usage = 0;  // (capacity - free - evictable) / capacity
};

struct RouteLatencyView {
  std::string route;
  uint64_t receipts = 0;  // in the interval (or since the start, on the first read)
  uint64_t total = 0;     // since the node started
  std::optional<double> p50_us, p99_us;
};

struct NodeView {
  std::string wall_utc;
  double interval_s = 0;  // 0 on the first read: the deltas are since the node started
  std::vector<PoolView> pools;
  int64_t workers = 0, sessions_opened = 0, sessions_lost = 0;
  int64_t lookups = 0, query_tokens = 0, hit_tokens = 0;  // in the interval
  std::optional<double> hit_rate;                         // hit / query tokens in the interval
  std::optional<double> hit_rate_total;                   // since the node started
  int64_t refusals = 0;                                   // allocations refused for capacity, in the interval
  uint64_t funnel_requests = 0, funnel_candidates = 0, funnel_leased = 0;  // since the node started
  int64_t leaked_blocks = 0, refcount_delta = 0;
  std::optional<int64_t> events_published, events_dropped;  // [events] only
  std::optional<std::vector<std::string>> alerts;           // active; nullopt: [metrics] off
  std::vector<RouteLatencyView> latency;                    // empty: no /metrics
};

NodeView node_view(const NodeViewSample* previous, const NodeViewSample& current);

// One line for logs (`kvrt stats --watch`).
std::string watch_line(const NodeView& view);
// The same as one JSON object (`kvrt stats --watch --json`: one per line).
nlohmann::ordered_json watch_json(const NodeView& view);
// The lines of a `kvrt top` frame, each cut to `width` columns.
std::vector<std::string> top_frame(const NodeView& view, const std::string& title, size_t width);

}  // namespace kvrt::watch
