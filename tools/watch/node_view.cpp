#include "tools/watch/node_view.hpp"

#include <algorithm>
#include <cstdio>

#include "services/reuse/reuse_funnel_counters.hpp"
#include "services/telemetry/alert_predicates.hpp"

namespace kvrt::watch {

namespace {

int64_t value(const NodeStats& s, const char* owner, const std::string& name) {
  return s.value(owner, name).value_or(0);
}

std::string percent(std::optional<double> r) {
  if (!r) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *r * 100.0);
  return buf;
}

std::string micros(std::optional<double> us) {
  if (!us) return "-";
  char buf[32];
  if (*us >= 1000.0)
    std::snprintf(buf, sizeof buf, "%.2f ms", *us / 1000.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f us", *us);
  return buf;
}

std::string bar(double fraction, size_t width) {
  const auto filled = static_cast<size_t>(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(width) + 0.5);
  std::string out(width + 2, '.');
  out.front() = '[';
  out.back() = ']';
  for (size_t i = 0; i < filled; ++i) out[i + 1] = '#';
  return out;
}

}  // namespace

NodeView node_view(const NodeViewSample* previous, const NodeViewSample& current) {
  const NodeStats& s = current.stats;
  NodeView v;
  v.wall_utc = current.wall_utc;
  v.interval_s = previous ? current.t_s - previous->t_s : 0;
  for (uint32_t g = 0; s.value("allocator", "pool" + std::to_string(g) + "_capacity_blocks"); ++g) {
    const std::string p = "pool" + std::to_string(g) + "_";
    PoolView pool{g,
                  value(s, "allocator", p + "capacity_blocks"),
                  value(s, "allocator", p + "free_blocks"),
                  value(s, "allocator", p + "evictable_blocks"),
                  value(s, "allocator", p + "live_blocks"),
                  value(s, "allocator", p + "in_transaction_blocks"),
                  0};
    if (pool.capacity > 0)
      pool.usage = static_cast<double>(pool.capacity - pool.free - pool.evictable) / static_cast<double>(pool.capacity);
    v.pools.push_back(pool);
  }
  const auto delta = [&](const char* owner, const char* name) {
    const int64_t now = value(s, owner, name);
    return previous ? now - value(previous->stats, owner, name) : now;
  };
  v.workers = value(s, "node", "workers_connected");
  v.sessions_opened = value(s, "node", "sessions_opened");
  v.sessions_lost = value(s, "node", "sessions_lost");
  v.lookups = delta("prefix_index", "lookups");
  v.query_tokens = delta("prefix_index", "lookup_prompt_tokens");
  v.hit_tokens = delta("prefix_index", "lookup_hit_tokens");
  if (v.query_tokens > 0) v.hit_rate = static_cast<double>(v.hit_tokens) / static_cast<double>(v.query_tokens);
  if (const int64_t q = value(s, "prefix_index", "lookup_prompt_tokens"); q > 0)
    v.hit_rate_total = static_cast<double>(value(s, "prefix_index", "lookup_hit_tokens")) / static_cast<double>(q);
  v.refusals = delta("allocator", "out_of_capacity");
  const NodeReuseFunnel f = node_reuse_funnel(s.owners);
  v.funnel_requests = f.requests;
  v.funnel_candidates = f.candidates;
  v.funnel_leased = f.leased;
  v.leaked_blocks = value(s, "allocator", "leaked_blocks");
  v.refcount_delta = value(s, "allocator", "refcount_delta");
  if (s.value("node", "kv_events_published")) {
    v.events_published = value(s, "node", "kv_events_published");
    v.events_dropped = value(s, "node", "kv_events_dropped");
  }
  if (s.value("node", "alert_allocator_exhaustion")) {
    v.alerts.emplace();
    for (size_t i = 0; i < kAlertCount; ++i) {
      const std::string name(to_string(static_cast<Alert>(i)));
      if (value(s, "node", "alert_" + name) != 0) v.alerts->push_back(name);
    }
  }
  if (current.latency) {
    for (const auto& [route, h] : *current.latency) {
      std::optional<metrics::HistogramValue> window = h;
      if (previous && previous->latency)
        if (const auto before = previous->latency->find(route); before != previous->latency->end())
          window = histogram_since(before->second, h);
      if (!window) continue;
      RouteLatencyView r;
      r.route = route;
      for (uint64_t n : window->bucket_counts) r.receipts += n;
      for (uint64_t n : h.bucket_counts) r.total += n;
      if (const auto p = histogram_quantile(0.5, *window)) r.p50_us = *p * 1e6;
      if (const auto p = histogram_quantile(0.99, *window)) r.p99_us = *p * 1e6;
      v.latency.push_back(std::move(r));
    }
  }
  return v;
}

std::string watch_line(const NodeView& v) {
  // Appended piece by piece: GCC 12 reports a false -Wrestrict on chains
  // of temporary strings here.
  std::string out = v.wall_utc;
  const auto add = [&out](std::initializer_list<std::string_view> pieces) {
    for (std::string_view p : pieces) out.append(p);
  };
  out.append(" usage");
  int64_t live = 0, evictable = 0, free = 0;
  for (const PoolView& p : v.pools) {
    add({" ", std::to_string(p.pool), ":", percent(p.usage)});
    live += p.live;
    evictable += p.evictable;
    free += p.free;
  }
  add({" live ", std::to_string(live), " evictable ", std::to_string(evictable), " free ", std::to_string(free)});
  add({" | workers ", std::to_string(v.workers), " lost ", std::to_string(v.sessions_lost)});
  add({" | lookups +", std::to_string(v.lookups), " hit ", percent(v.hit_rate), " (", std::to_string(v.hit_tokens), "/",
       std::to_string(v.query_tokens), " tok)"});
  add({" | refused +", std::to_string(v.refusals)});
  if (v.events_published)
    add({" | events ", std::to_string(*v.events_published), " dropped ", std::to_string(*v.events_dropped)});
  if (v.alerts) {
    out.append(" | alerts ");
    if (v.alerts->empty()) out.append("none");
    for (size_t i = 0; i < v.alerts->size(); ++i) add({i > 0 ? "," : "", (*v.alerts)[i]});
  }
  if (v.leaked_blocks != 0 || v.refcount_delta != 0)
    add({" | LEAKED ", std::to_string(v.leaked_blocks), " refcount delta ", std::to_string(v.refcount_delta)});
  return out;
}

nlohmann::ordered_json watch_json(const NodeView& v) {
  nlohmann::ordered_json j;
  j["time"] = v.wall_utc;
  j["interval_s"] = v.interval_s;
  for (const PoolView& p : v.pools)
    j["pools"].push_back({{"pool", p.pool},
                          {"capacity_blocks", p.capacity},
                          {"free_blocks", p.free},
                          {"evictable_blocks", p.evictable},
                          {"live_blocks", p.live},
                          {"in_transaction_blocks", p.in_transaction},
                          {"usage", p.usage}});
  j["workers_connected"] = v.workers;
  j["sessions_opened"] = v.sessions_opened;
  j["sessions_lost"] = v.sessions_lost;
  j["lookups"] = v.lookups;
  j["query_tokens"] = v.query_tokens;
  j["hit_tokens"] = v.hit_tokens;
  j["hit_rate"] = v.hit_rate ? nlohmann::ordered_json(*v.hit_rate) : nlohmann::ordered_json(nullptr);
  j["allocation_refusals"] = v.refusals;
  j["reuse_funnel"] = {
      {"requests", v.funnel_requests}, {"candidates", v.funnel_candidates}, {"leased", v.funnel_leased}};
  j["leaked_blocks"] = v.leaked_blocks;
  j["refcount_delta"] = v.refcount_delta;
  if (v.events_published) j["kv_events"] = {{"published", *v.events_published}, {"dropped", *v.events_dropped}};
  if (v.alerts) j["alerts"] = *v.alerts;
  for (const RouteLatencyView& r : v.latency)
    j["receipt_latency"][r.route] = {
        {"receipts", r.receipts},
        {"total", r.total},
        {"p50_us", r.p50_us ? nlohmann::ordered_json(*r.p50_us) : nlohmann::ordered_json(nullptr)},
        {"p99_us", r.p99_us ? nlohmann::ordered_json(*r.p99_us) : nlohmann::ordered_json(nullptr)}};
  return j;
}

std::vector<std::string> top_frame(const NodeView& v, const std::string& title, size_t width) {
  std::vector<std::string> lines;
  lines.push_back(title + "   " + v.wall_utc + "   (q or Ctrl-C quits)");
  lines.emplace_back();
  lines.push_back("POOLS        capacity      free evictable      live   in-tx  usage");
  for (const PoolView& p : v.pools) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  pool %-4u %9lld %9lld %9lld %9lld %7lld  %6s ", p.pool,
                  static_cast<long long>(p.capacity), static_cast<long long>(p.free),
                  static_cast<long long>(p.evictable), static_cast<long long>(p.live),
                  static_cast<long long>(p.in_transaction), percent(p.usage).c_str());
    lines.push_back(std::string(buf) + bar(p.usage, 20));
  }
  lines.emplace_back();
  lines.push_back("PREFIX CACHE  hit rate " + percent(v.hit_rate) + " this interval (" + std::to_string(v.hit_tokens) +
                  " of " + std::to_string(v.query_tokens) + " tokens, " + std::to_string(v.lookups) + " lookups), " +
                  percent(v.hit_rate_total) + " since start");
  lines.push_back("REUSE FUNNEL  requests " + std::to_string(v.funnel_requests) + " -> candidates " +
                  std::to_string(v.funnel_candidates) + " -> leased " + std::to_string(v.funnel_leased));
  lines.push_back("ALLOCATIONS   refused for capacity this interval: " + std::to_string(v.refusals) +
                  "   leaked blocks " + std::to_string(v.leaked_blocks) + "   refcount delta " +
                  std::to_string(v.refcount_delta));
  lines.push_back("SESSIONS      connected " + std::to_string(v.workers) + "   opened " +
                  std::to_string(v.sessions_opened) + "   lost " + std::to_string(v.sessions_lost));
  if (v.events_published)
    lines.push_back("KV EVENTS     published " + std::to_string(*v.events_published) + "   dropped " +
                    std::to_string(*v.events_dropped));
  lines.emplace_back();
  if (!v.alerts) {
    lines.push_back("ALERTS        (the node has no [metrics]: not evaluated)");
  } else if (v.alerts->empty()) {
    lines.push_back("ALERTS        none of the seven joint alerts holds");
  } else {
    std::string a;
    for (const std::string& name : *v.alerts) {
      if (!a.empty()) a += ", ";
      a += name;
    }
    lines.push_back("ALERTS        ACTIVE: " + a);
  }
  lines.emplace_back();
  if (v.latency.empty()) {
    lines.push_back("LATENCY       (no /metrics to read receipt latency from)");
  } else {
    lines.push_back(std::string("LATENCY       route             receipts        p50        p99      total") +
                    (v.interval_s > 0 ? "   (receipts and quantiles of this interval)" : "   (since start)"));
    for (const RouteLatencyView& r : v.latency) {
      if (r.total == 0) continue;  // a route this node never answered
      char buf[200];
      std::snprintf(buf, sizeof buf, "              %-16s %9llu %10s %10s %10llu", r.route.c_str(),
                    static_cast<unsigned long long>(r.receipts), micros(r.p50_us).c_str(), micros(r.p99_us).c_str(),
                    static_cast<unsigned long long>(r.total));
      lines.push_back(buf);
    }
  }
  for (std::string& l : lines)
    if (l.size() > width) l.resize(width);
  return lines;
}

}  // namespace kvrt::watch
