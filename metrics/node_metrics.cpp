// The node's metric families, in the order docs/operations.md lists them.
#include "metrics/node_metrics.hpp"

#include <span>
#include <string_view>

#include "metrics/owner_values.hpp"
#include "metrics/prometheus_exposition.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "services/session/routes.hpp"

namespace kvrt::metrics {

namespace {

using Labels = std::vector<MetricLabel>;

double nonneg(int64_t v) { return v > 0 ? static_cast<double>(v) : 0.0; }

// A family of one unlabelled sample.
Status single(PrometheusExposition& e, const char* name, MetricType type, const char* help, double value) {
  KVRT_TRY(e.family(name, type, help));
  return e.sample(value);
}

Status pools(PrometheusExposition& e, const OwnerValues& v) {
  std::vector<uint32_t> pools;
  for (uint32_t g = 0; v.has("allocator", "pool" + std::to_string(g) + "_capacity_blocks"); ++g) pools.push_back(g);
  auto at = [&](uint32_t g, const char* what) { return v("allocator", "pool" + std::to_string(g) + "_" + what); };
  KVRT_TRY(e.family("kvrt_pool_capacity_blocks", MetricType::gauge, "Blocks in each K/V pool (one per cache group)."));
  for (uint32_t g : pools) KVRT_TRY(e.sample(Labels{{"pool", std::to_string(g)}}, nonneg(at(g, "capacity_blocks"))));
  KVRT_TRY(e.family("kvrt_pool_blocks", MetricType::gauge,
                    "Blocks of each pool by state (0x04A): free, evictable (cached, refcount 0), live "
                    "(referenced), in_transaction (reserved or copying)."));
  for (uint32_t g : pools)
    for (const char* state : {"free", "evictable", "live", "in_transaction"})
      KVRT_TRY(e.sample(Labels{{"pool", std::to_string(g)}, {"state", state}},
                        nonneg(at(g, (std::string(state) + "_blocks").c_str()))));
  KVRT_TRY(e.family("kvrt_pool_peak_live_blocks", MetricType::gauge, "Most live blocks each pool has held at once."));
  for (uint32_t g : pools) KVRT_TRY(e.sample(Labels{{"pool", std::to_string(g)}}, nonneg(at(g, "peak_live_blocks"))));
  KVRT_TRY(e.family("kvrt_kv_cache_usage_ratio", MetricType::gauge,
                    "Fraction of each pool's blocks in use, 1 = full (vLLM's kv_cache_usage_perc: free and "
                    "evictable blocks are not in use)."));
  for (uint32_t g : pools) {
    const double capacity = nonneg(at(g, "capacity_blocks"));
    const double idle = nonneg(at(g, "free_blocks")) + nonneg(at(g, "evictable_blocks"));
    KVRT_TRY(e.sample(Labels{{"pool", std::to_string(g)}}, capacity > 0 ? (capacity - idle) / capacity : 0.0));
  }
  // Reconciliation gauges of 0x0CF: they must balance.
  KVRT_TRY(e.family("kvrt_pool_partition_residual_blocks", MetricType::gauge,
                    "N_pool - (free + evictable + live + in_transaction) per pool (0x0CF); nonzero is a "
                    "ledger fault."));
  for (uint32_t g : pools)
    KVRT_TRY(e.sample(Labels{{"pool", std::to_string(g)}},
                      static_cast<double>(at(g, "capacity_blocks") - at(g, "free_blocks") - at(g, "evictable_blocks") -
                                          at(g, "live_blocks") - at(g, "in_transaction_blocks"))));
  return Status::success();
}

Status memory(PrometheusExposition& e, const OwnerValues& v) {
  const double valid = nonneg(v("allocator", "live_valid_rows"));
  const double allocated = nonneg(v("allocator", "live_allocated_rows"));
  KVRT_TRY(single(e, "kvrt_kv_live_valid_rows", MetricType::gauge,
                  "Committed K/V rows (tokens) in referenced blocks, every pool.", valid));
  KVRT_TRY(single(e, "kvrt_kv_live_allocated_rows", MetricType::gauge,
                  "Rows (tokens) the referenced blocks hold: blocks x block size, every pool.", allocated));
  KVRT_TRY(single(e, "kvrt_kv_memory_efficiency_ratio", MetricType::gauge,
                  "Valid rows over allocated rows of referenced blocks (the utilisation PagedAttention reports); "
                  "0 when no block is referenced.",
                  allocated > 0 ? valid / allocated : 0.0));
  KVRT_TRY(single(e, "kvrt_refcount_delta_references", MetricType::gauge,
                  "Recorded minus derived block references (0x0CF); nonzero is an ownership fault.",
                  static_cast<double>(v("allocator", "refcount_delta"))));
  KVRT_TRY(single(e, "kvrt_leaked_blocks", MetricType::gauge, "Referenced blocks no held request or lease reaches.",
                  static_cast<double>(v("allocator", "leaked_blocks"))));
  return single(e, "kvrt_mapping_lag_tokens", MetricType::gauge,
                "L_map = max(0, f_required - f_ready) of the worst active mapper slot (0x0CF); positive blocks "
                "execution.",
                nonneg(v("mapper", "mapping_lag_tokens")));
}

// A family of one sample that is one owner statistic as it stands.
struct DirectFamily {
  const char* name;
  MetricType type;
  const char* help;
  const char* owner;
  const char* stat;
};

Status direct(PrometheusExposition& e, const OwnerValues& v, std::span<const DirectFamily> families) {
  for (const DirectFamily& f : families) KVRT_TRY(single(e, f.name, f.type, f.help, nonneg(v(f.owner, f.stat))));
  return Status::success();
}

constexpr DirectFamily kPrefixCacheFamilies[] = {
    {"kvrt_prefix_cache_queries_tokens_total", MetricType::counter,
     "Prompt tokens looked up in the prefix index (vLLM's prefix_cache_queries).", "prefix_index",
     "lookup_prompt_tokens"},
    {"kvrt_prefix_cache_hits_tokens_total", MetricType::counter,
     "Prompt tokens the prefix index had cached (vLLM's prefix_cache_hits); rate(hits) / rate(queries) is the "
     "token hit rate.",
     "prefix_index", "lookup_hit_tokens"},
    {"kvrt_prefix_cache_lookups_total", MetricType::counter, "Prefix lookups answered.", "prefix_index", "lookups"},
    {"kvrt_prefix_cache_publications_total", MetricType::counter, "Publications the prefix index accepted.",
     "prefix_index", "publications"},
    {"kvrt_prefix_cache_leased_blocks", MetricType::gauge,
     "Blocks the node's own prefix cache (the radix tree) holds by lease: live to the allocator, yet freed by the "
     "radix owner's pressure relief.",
     "allocator", "node_leases"},
    {"kvrt_cow_copies_total", MetricType::counter, "Copy-on-write copies of a shared partial tail block (0x05A).",
     "allocator", "partial_tails_copied"},
    {"kvrt_cow_copied_rows_total", MetricType::counter,
     "Token rows copied by copy-on-write, each spanning every cache group.", "allocator", "partial_tail_rows_copied"},
};

Status prefix_cache(PrometheusExposition& e, const OwnerValues& v, const NodeMetricsFacts& facts) {
  KVRT_TRY(direct(e, v, kPrefixCacheFamilies));
  const bool radix = v("prefix_index", "radix") > 0;
  KVRT_TRY(single(e, "kvrt_prefix_cache_blocks", MetricType::gauge,
                  "Blocks the prefix index names: pages x cache groups held by the radix tree, or the hash "
                  "chain's cached block entries.",
                  nonneg(radix ? v("prefix_index", "cached_blocks") : v("prefix_index", "cached_block_entries"))));
  KVRT_TRY(single(
      e, "kvrt_cache_evicted_blocks_total", MetricType::counter,
      "Cached blocks evicted: cached identities the allocator dropped (evicted or recycled) plus the "
      "radix tree's evicted pages x cache groups.",
      nonneg(v("allocator", "cache_keys_dropped")) + nonneg(v("prefix_index", "evicted_pages")) * facts.cache_groups));
  return single(e, "kvrt_cow_copied_bytes_total", MetricType::counter,
                "Bytes copied by copy-on-write: rows x B_row summed over the groups (0x02A).",
                nonneg(v("allocator", "partial_tail_rows_copied")) * static_cast<double>(facts.row_bytes));
}

Status funnel(PrometheusExposition& e, const OwnerValues& v) {
  const NodeReuseFunnel f = node_reuse_funnel(v.all());
  KVRT_TRY(e.family("kvrt_reuse_funnel_total", MetricType::counter,
                    "Reuse attempts that reached each stage of the 0x0CF funnel (every prefix lookup is one)."));
  const std::pair<const char*, uint64_t> stages[] = {{"requests", f.requests},          {"authorized", f.authorized},
                                                     {"candidates", f.candidates},      {"compatible", f.compatible()},
                                                     {"current_generation", f.current}, {"leased", f.leased}};
  for (const auto& [stage, n] : stages) KVRT_TRY(e.sample(Labels{{"stage", stage}}, static_cast<double>(n)));
  KVRT_TRY(e.family("kvrt_reuse_rejections_total", MetricType::counter,
                    "Reuse attempts rejected, by funnel bucket and reason (0x0CF)."));
  for (size_t r = 0; r < kRejectionReasonCount; ++r) {
    const auto reason = static_cast<RejectionReason>(r);
    KVRT_TRY(e.sample(
        Labels{{"bucket", std::string(to_string(bucket_of(reason)))}, {"reason", std::string(to_string(reason))}},
        static_cast<double>(f.rejections[r])));
  }
  KVRT_TRY(e.family("kvrt_reuse_unsettled_candidates", MetricType::gauge,
                    "Candidates no allocation has presented yet (in flight, or dropped by the engine)."));
  KVRT_TRY(e.sample(static_cast<double>(f.unsettled)));
  KVRT_TRY(e.family("kvrt_reuse_candidate_outcomes_total", MetricType::counter,
                    "Candidates presented to an allocation that found no room or hit its namespace quota."));
  KVRT_TRY(e.sample(Labels{{"outcome", "out_of_capacity"}}, static_cast<double>(f.out_of_capacity)));
  KVRT_TRY(e.sample(Labels{{"outcome", "quota_exceeded"}}, static_cast<double>(f.quota_exceeded)));
  KVRT_TRY(e.family("kvrt_reuse_transactions_total", MetricType::counter,
                    "Executable-reuse transactions (0x0CD) of the reuse coordinator, by outcome."));
  for (const char* outcome : {"receipts", "rejections", "errors"})
    KVRT_TRY(e.sample(Labels{{"outcome", outcome}}, nonneg(v("reuse", outcome))));
  return Status::success();
}

constexpr DirectFamily kLifecycleFamilies[] = {
    {"kvrt_invalidated_pages_total", MetricType::counter, "Radix pages removed by purges and invalidations.",
     "prefix_index", "invalidated_pages"},
    {"kvrt_workers_connected", MetricType::gauge, "Worker sessions open now.", "node", "workers_connected"},
    {"kvrt_sessions_opened_total", MetricType::counter, "Worker sessions opened.", "node", "sessions_opened"},
    {"kvrt_sessions_ended_total", MetricType::counter,
     "Worker sessions ended and their holdings released, closed or lost.", "node", "sessions_reclaimed"},
    {"kvrt_sessions_lost_total", MetricType::counter,
     "Sessions lost mid-work: the worker died, or its heartbeats stopped past the connection timeout.", "node",
     "sessions_lost"},
    {"kvrt_sessions_silenced_total", MetricType::counter,
     "Sessions on the session channel whose heartbeats stopped: the liveness watch ended them (counted in "
     "kvrt_sessions_lost_total too; a middleman session's silence shows only there).",
     "node", "sessions_silenced"},
    {"kvrt_hellos_refused_total", MetricType::counter,
     "Session openings refused (bad token, unknown principal, malformed hello).", "node", "hellos_refused"},
    {"kvrt_requests_reclaimed_total", MetricType::counter,
     "Requests the allocator released for sessions that ended holding them.", "allocator", "requests_reclaimed"},
    {"kvrt_allocation_refusals_total", MetricType::counter,
     "Allocations refused for capacity (allocation_failures of 0x0CF).", "allocator", "out_of_capacity"},
    {"kvrt_locked_eviction_rejects_total", MetricType::counter,
     "Of those, refused while the node's prefix cache held leased blocks (0x0CF locked-cache pressure).", "allocator",
     "locked_eviction_rejects"},
    {"kvrt_fault_points_fired_total", MetricType::counter, "Owner fault points fired ([node] fault_injection runs).",
     "allocator", "fault_points_fired"},
};

Status lifecycle(PrometheusExposition& e, const OwnerValues& v) {
  KVRT_TRY(e.family("kvrt_purges_total", MetricType::counter, "Namespace purges (0x0CE), by outcome."));
  for (const char* outcome : {"completed", "refused", "stopped"})
    KVRT_TRY(e.sample(Labels{{"outcome", outcome}}, nonneg(v("authorization", std::string("purges_") + outcome))));
  KVRT_TRY(e.family("kvrt_purge_duration_seconds", MetricType::gauge,
                    "Duration of the last completed purge and of the longest one."));
  KVRT_TRY(e.sample(Labels{{"purge", "last"}}, nonneg(v("authorization", "last_purge_us")) * 1e-6));
  KVRT_TRY(e.sample(Labels{{"purge", "max"}}, nonneg(v("authorization", "max_purge_us")) * 1e-6));
  KVRT_TRY(e.family("kvrt_invalidations_total", MetricType::counter,
                    "Namespace invalidations (0x01A): a successor generation made current, by outcome."));
  KVRT_TRY(e.sample(Labels{{"outcome", "completed"}}, nonneg(v("authorization", "invalidations"))));
  KVRT_TRY(e.sample(Labels{{"outcome", "refused"}}, nonneg(v("authorization", "invalidations_refused"))));
  KVRT_TRY(direct(e, v, kLifecycleFamilies));
  KVRT_TRY(e.family("kvrt_owner_errors_total", MetricType::counter,
                    "Operations an owner answered with a typed error, by owner."));
  const std::pair<const char*, const char*> errors[] = {
      {"allocator", "operation_errors"}, {"mapper", "errors"}, {"executor", "errors"}, {"reuse", "errors"}};
  for (const auto& [owner, name] : errors) KVRT_TRY(e.sample(Labels{{"owner", owner}}, nonneg(v(owner, name))));
  return Status::success();
}

constexpr DirectFamily kEventFamilies[] = {
    {"kvrt_kv_events_published_total", MetricType::counter,
     "KV events (BlockStored, BlockRemoved, AllBlocksCleared) sent on the PUB socket.", "node", "kv_events_published"},
    {"kvrt_kv_events_dropped_total", MetricType::counter, "KV events dropped because the publisher's queue was full.",
     "node", "kv_events_dropped"},
    {"kvrt_kv_event_batches_published_total", MetricType::counter, "Event batches sent (one sequence number each).",
     "node", "kv_event_batches_published"},
    {"kvrt_kv_event_replays_served_total", MetricType::counter, "Replay requests answered on the ROUTER socket.",
     "node", "kv_event_replays_served"},
};

Status latency(PrometheusExposition& e, const RouteLatency& l) {
  KVRT_TRY(e.family("kvrt_receipt_latency_seconds", MetricType::histogram,
                    "Time an owner takes to answer a routed call: request decoded, served and the receipt "
                    "encoded (or delivered, for a route answered later); mailbox waits excluded."));
  Status status = Status::success();
  for_each_route([&]<class R>() {
    if (!status.ok()) return;
    status = e.histogram(Labels{{"owner", std::string(owner_name(R::owner))}, {"route", std::string(R::name)}},
                         l.snapshot(R::id.value));
  });
  return status;
}

Status alerts(PrometheusExposition& e, const AlertEvaluation& a) {
  KVRT_TRY(single(e, "kvrt_alert_window_seconds", MetricType::gauge,
                  "Span of the window the node's alert evaluation covers now (grows to the configured window "
                  "as the node ages).",
                  a.evaluated ? static_cast<double>(a.later.at_ms - a.earlier.at_ms) * 1e-3 : 0.0));
  KVRT_TRY(e.family("kvrt_alert_active", MetricType::gauge,
                    "1 while the joint alert predicate of 0x0CF holds over the node's window, else 0."));
  for (size_t i = 0; i < kAlertCount; ++i)
    KVRT_TRY(e.sample(Labels{{"alert", std::string(to_string(static_cast<Alert>(i)))}}, a.active[i] ? 1.0 : 0.0));
  // The predicates' inputs: gauges at the window's end, counters as their
  // increase over the window.
  KVRT_TRY(e.family("kvrt_alert_input", MetricType::gauge,
                    "What each alert predicate read: gauges at the window's end, counters as their increase "
                    "over the window."));
  const CounterSnapshot& l = a.later;
  const CounterSnapshot& s = a.earlier;
  auto rise = [&](uint64_t later, uint64_t earlier) {
    return a.evaluated && later >= earlier ? static_cast<double>(later - earlier) : 0.0;
  };
  struct Input {
    const char* alert;
    const char* input;
    double value;
  };
  const Input inputs[] = {
      {"allocator_exhaustion", "free_blocks", static_cast<double>(l.free_blocks)},
      {"allocator_exhaustion", "evictable_blocks", static_cast<double>(l.evictable_blocks)},
      {"allocator_exhaustion", "allocation_failures_increase", rise(l.allocation_failures, s.allocation_failures)},
      {"locked_cache_pressure", "free_blocks", static_cast<double>(l.free_blocks)},
      {"locked_cache_pressure", "evictable_blocks", static_cast<double>(l.evictable_blocks)},
      {"locked_cache_pressure", "locked_eviction_rejects_increase",
       rise(l.locked_eviction_rejects, s.locked_eviction_rejects)},
      {"reference_leak", "refcount_delta", static_cast<double>(l.refcount_delta)},
      {"mapping_stall", "mapping_lag_tokens",
       static_cast<double>(l.required_frontier_tokens - l.ready_frontier_tokens)},
      {"mapping_stall", "map_wait_age_seconds", static_cast<double>(l.map_wait_age_ms) * 1e-3},
      {"compatibility_churn", "candidate_matches_increase", rise(l.candidate_matches, s.candidate_matches)},
      {"compatibility_churn", "compatible_matches_increase", rise(l.compatible_matches, s.compatible_matches)},
      {"stale_receipt_race", "candidate_matches_increase", rise(l.candidate_matches, s.candidate_matches)},
      {"stale_receipt_race", "generation_version_rejects_increase",
       rise(l.generation_version_rejects, s.generation_version_rejects)},
      {"security_boundary_pressure", "cross_namespace_rejects_increase",
       rise(l.cross_namespace_rejects, s.cross_namespace_rejects)},
      {"security_boundary_pressure", "stale_namespace_rejects_increase",
       rise(l.stale_namespace_rejects, s.stale_namespace_rejects)},
  };
  for (const Input& i : inputs) KVRT_TRY(e.sample(Labels{{"alert", i.alert}, {"input", i.input}}, i.value));
  return Status::success();
}

// Every value `kvrt stats` reports, by owner: nothing an owner counts is
// out of a scrape's reach, and a scrape can be checked against the CLI.
Status owner_values(PrometheusExposition& e, const OwnerValues& v) {
  KVRT_TRY(e.family("kvrt_owner_stat", MetricType::gauge,
                    "Every value of `kvrt stats`, by owner (\"<owner>@<domain>\" with pools per trust domain) "
                    "and name; the families above are the documented views of these."));
  for (const OwnerStats& o : v.all())
    for (const StatValue& s : o.values)
      KVRT_TRY(e.sample(Labels{{"owner", o.owner}, {"name", s.name}}, static_cast<double>(s.value)));
  return Status::success();
}

}  // namespace

Result<std::string> render_node_metrics(const NodeMetricsSources& sources) {
  if (sources.owners == nullptr) return make_error(ErrorCode::invalid_argument, "no owner statistics", "owners");
  const OwnerValues v(*sources.owners);
  PrometheusExposition e;
  KVRT_TRY(single(e, "kvrt_node_uptime_seconds", MetricType::gauge, "Seconds since the node started serving.",
                  sources.uptime_seconds));
  KVRT_TRY(pools(e, v));
  KVRT_TRY(memory(e, v));
  KVRT_TRY(prefix_cache(e, v, sources.facts));
  KVRT_TRY(funnel(e, v));
  KVRT_TRY(lifecycle(e, v));
  if (v.has("node", "kv_events_published")) KVRT_TRY(direct(e, v, kEventFamilies));
  if (sources.latency) KVRT_TRY(latency(e, *sources.latency));
  if (sources.alerts) KVRT_TRY(alerts(e, *sources.alerts));
  KVRT_TRY(owner_values(e, v));
  return e.text();
}

}  // namespace kvrt::metrics
