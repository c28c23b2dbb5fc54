// summary_json (the `kvrt run --json` object) and report.json.
// Field names are the RunReport's own; derived figures follow
// report_facts.hpp, undefined ratios are null. Strings pass through
// sanitize_utf8 so that dump() never throws on a malformed name.
#include <nlohmann/json.hpp>

#include "tools/report/report_facts.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"
#include "tools/report/report_render.hpp"

namespace kvrt::report {
namespace {
using nlohmann::json;

json optional_number(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

json ledger_json(const MemoryLedger& l) {
  return json{{"rectangular_bytes", l.rectangular_bytes},
              {"request_view_bytes", l.request_view_bytes},
              {"unique_physical_bytes", l.unique_physical_bytes},
              {"pool_bytes", l.pool_bytes},
              {"metadata_bytes", l.metadata_bytes}};
}

// Stages and buckets keep their order (an array), each {name, count}; a
// bucket also names the two stages it separates when the report's lists line
// up as in 0x0CF (bucket b between stage b and stage b + 1).
json funnel_json(const RunReport& r) {
  json stages = json::array(), buckets = json::array();
  for (const auto& [name, count] : r.funnel_stages) stages.push_back({{"name", sanitize_utf8(name)}, {"count", count}});
  for (size_t b = 0; b < r.rejection_buckets.size(); ++b) {
    json entry{{"name", sanitize_utf8(r.rejection_buckets[b].first)}, {"count", r.rejection_buckets[b].second}};
    if (auto after = stage_after_bucket(r, b))
      entry["between"] = {sanitize_utf8(r.funnel_stages[*after - 1].first),
                          sanitize_utf8(r.funnel_stages[*after].first)};
    buckets.push_back(std::move(entry));
  }
  const json node{{"requests", r.node_reuse_requests},
                  {"candidates", r.node_reuse_candidates},
                  {"leased", r.node_reuse_leased},
                  {"not_current", r.node_reuse_not_current},
                  {"quota_exceeded", r.node_reuse_quota_exceeded}};
  return json{{"stages", stages}, {"buckets", buckets}, {"node_view", node}};
}

json sample_json(const UtilisationSample& s, bool with_ledger) {
  json j{{"t_s", s.t_s},
         {"used_blocks", s.used_blocks},
         {"evictable_blocks", s.evictable_blocks},
         {"capacity_blocks", s.capacity_blocks},
         {"live_requests", s.live_requests},
         {"valid_rows", s.valid_rows},
         {"allocated_rows", s.allocated_rows}};
  if (with_ledger) j["ledger"] = ledger_json(s.ledger);
  return j;
}

json latency_summary_json(const OwnerLatencySummary& s) {
  return json{{"calls", s.calls},   {"measured", s.measured}, {"p50_us", s.p50_us},
              {"p90_us", s.p90_us}, {"p99_us", s.p99_us},     {"max_us", s.max_us}};
}

json comparison_json(const RunReport& r) {
  json rows = json::array();
  for (const auto& row : r.comparison) {
    const ComparisonRatios ratios = comparison_ratios(r.comparison.front(), row);
    rows.push_back({{"mode", sanitize_utf8(row.mode)},
                    {"prefill_rows_computed", row.prefill_rows_computed},
                    {"decode_kv_bytes_read", row.decode_kv_bytes_read},
                    {"peak_pool_bytes", row.peak_pool_bytes},
                    {"wall_s", row.wall_s},
                    {"complete", row.complete},
                    {"ratios",
                     {{"prefill_rows_computed", optional_number(ratios.prefill_rows_computed)},
                      {"decode_kv_bytes_read", optional_number(ratios.decode_kv_bytes_read)},
                      {"peak_pool_bytes", optional_number(ratios.peak_pool_bytes)},
                      {"wall_s", optional_number(ratios.wall_s)}}}});
  }
  return json{{"baseline", r.comparison.empty() ? json(nullptr) : json(sanitize_utf8(r.comparison.front().mode))},
              {"ratio", "baseline / row: how many times less the row needs, > 1 is better (docs/benchmarks.md)"},
              {"rows", rows}};
}

}  // namespace

nlohmann::json summary_json(const RunReport& r) {
  json j;
  // What ran.
  j["workload_name"] = sanitize_utf8(r.workload_name);
  j["workload_origin"] = sanitize_utf8(r.workload_origin);
  j["layout_id"] = sanitize_utf8(r.layout_id);
  j["prefix_index"] = sanitize_utf8(r.prefix_index);
  j["reuse_policy"] = sanitize_utf8(r.reuse_policy);
  j["started_at"] = sanitize_utf8(r.started_at);
  j["workers"] = r.workers;
  j["wall_s"] = r.wall_s;
  // Work and reuse.
  j["requests"] = r.requests;
  j["tokens_requested"] = r.tokens_requested;
  j["prompt_tokens"] = r.prompt_tokens;
  j["decode_tokens"] = r.decode_tokens;
  j["prefill_rows_computed"] = r.prefill_rows_computed;
  j["prefill_rows_reused"] = r.prefill_rows_reused;
  j["reuse_ratio"] = optional_number(reuse_ratio(r.prefill_rows_reused, r.prefill_rows_computed));
  j["prefill_rows_forked"] = r.prefill_rows_forked;
  j["reused_by_hash_chain"] = r.reused_by_hash_chain;
  j["reused_by_radix"] = r.reused_by_radix;
  j["reused_unattributed"] = unattributed_reuse(r);
  j["shared_prefix_rows_read_once"] = r.shared_prefix_rows_read_once;
  j["shared_prefix_rows_per_request"] = r.shared_prefix_rows_per_request;
  j["shared_prefix_read_saving"] = optional_number(saving_ratio(static_cast<double>(r.shared_prefix_rows_per_request),
                                                                static_cast<double>(r.shared_prefix_rows_read_once)));
  const auto& x = r.shared_execution;
  j["shared_prefix_execution"] = {{"site", x.site},
                                  {"design", x.design},
                                  {"batches", x.batches},
                                  {"ops", x.ops},
                                  {"hydragen", x.hydragen},
                                  {"chunk_attention", x.chunk_attention},
                                  {"per_request", x.per_request},
                                  {"max_levels", x.max_levels},
                                  {"multi_level_ops", x.multi_level_ops},
                                  {"refusals", x.refusals},
                                  {"rows_read", x.rows_read},
                                  {"rows_per_request", x.rows_per_request}};
  j["pools"] = {{"backend", r.pools.backend},
                {"staged", r.pools.staged},
                {"rows_loaded", r.pools.rows_loaded},
                {"rows_stored", r.pools.rows_stored}};
  if (const auto& t = r.session_tier; t.used)
    j["session_tier"] = {{"saves", t.saves},
                         {"saved_bytes", t.saved_bytes},
                         {"turns_resumed", t.turns_resumed},
                         {"rows_loaded", t.rows_loaded},
                         {"resume_refusals", t.resume_refusals},
                         {"load_s", t.load_s},
                         {"save_s", t.save_s},
                         {"recompute_s", t.recompute_s}};
  if (const auto& p = r.prompt_cache; p.used)
    j["prompt_cache"] = {{"requests", p.requests},
                         {"modules_reused", p.modules_reused},
                         {"module_rows_reused", p.module_rows_reused},
                         {"modules_computed", p.modules_computed},
                         {"module_rows_computed", p.module_rows_computed},
                         {"modules_published", p.modules_published},
                         {"misses_not_computed", p.misses_not_computed},
                         {"misses_incompatible", p.misses_incompatible},
                         {"stale_schema", p.stale_schema},
                         {"node_misses",
                          [&] {
                            nlohmann::json m = nlohmann::json::object();
                            for (const auto& [reason, n] : p.node_misses) m[reason] = n;
                            return m;
                          }()},
                         {"copy_s", p.copy_s},
                         {"recompute_s", p.recompute_s}};
  if (const auto& v = r.virtual_pages; v.used)
    j["virtual_pages"] = {{"steps", v.steps},
                          {"steps_infeasible", v.steps_infeasible},
                          {"pages_mapped", v.pages_mapped},
                          {"bundles_reclaimed", v.bundles_reclaimed},
                          {"retained_slot_reuses", v.retained_slot_reuses},
                          {"retained_pages_reused", v.retained_pages_reused},
                          {"reserved_bytes", v.reserved_bytes},
                          {"pool_bytes", v.pool_bytes},
                          {"mapped_peak_bytes", v.mapped_peak_bytes},
                          {"active_valid_at_peak_bytes", v.active_valid_at_peak_bytes},
                          {"pages_mapped_ahead", v.pages_mapped_ahead},
                          {"tier_refusals", v.tier_refusals},
                          {"node_bundle_maps", v.node_bundle_maps},
                          {"node_bundle_unmaps", v.node_bundle_unmaps},
                          {"node_map_ahead_hits", v.node_map_ahead_hits},
                          {"node_map_ahead_foreground_maps", v.node_map_ahead_foreground_maps},
                          {"map_step_p50_us", v.map_step_p50_us},
                          {"map_step_p99_us", v.map_step_p99_us},
                          {"view_map_work_us", v.view_map_work_us},
                          {"view_map_visible_us", v.view_map_visible_us},
                          {"view_map_hidden_fraction", v.hidden_fraction()}};
  if (!r.physical_modes.empty()) {
    json modes = json::array();
    for (const auto& m : r.physical_modes)
      modes.push_back({{"layout_id", sanitize_utf8(m.layout_id)},
                       {"physical_mode", m.physical_mode},
                       {"exact", m.exact},
                       {"wall_s", m.wall_s},
                       {"prefill_rows_computed", m.prefill_rows_computed},
                       {"prefill_rows_reused", m.prefill_rows_reused},
                       {"rows_checked", m.rows_checked},
                       {"peak_unique_physical_bytes", m.peak_unique_physical_bytes},
                       {"pages_mapped", m.virtual_pages.pages_mapped},
                       {"bundles_reclaimed", m.virtual_pages.bundles_reclaimed},
                       {"map_step_p50_us", m.virtual_pages.map_step_p50_us},
                       {"map_step_p99_us", m.virtual_pages.map_step_p99_us},
                       {"view_map_hidden_fraction", m.virtual_pages.hidden_fraction()},
                       {"reserved_bytes", m.virtual_pages.reserved_bytes},
                       {"pool_bytes", m.virtual_pages.pool_bytes},
                       {"mapped_peak_bytes", m.virtual_pages.mapped_peak_bytes}});
    j["physical_modes"] = modes;
  }
  j["funnel"] = funnel_json(r);
  // Memory (0x02): the peak ledger and how many times smaller each ledger is
  // than the rectangular reservation.
  j["peak_ledger"] = ledger_json(r.peak_ledger);
  const auto rect = static_cast<double>(r.peak_ledger.rectangular_bytes);
  j["peak_ledger_saving_vs_rectangular"] = {
      {"request_view", optional_number(saving_ratio(rect, static_cast<double>(r.peak_ledger.request_view_bytes)))},
      {"unique_physical",
       optional_number(saving_ratio(rect, static_cast<double>(r.peak_ledger.unique_physical_bytes)))}};
  j["pool_utilisation"] = r.pool_utilisation;
  j["timeline_samples"] = r.timeline.size();
  const UtilisationSample* peak = peak_sample(r);
  j["peak_sample"] = peak ? sample_json(*peak, false) : json(nullptr);
  j["memory_efficiency_at_peak"] = peak ? optional_number(memory_efficiency(*peak)) : json(nullptr);
  // Latency per owner, workers, verdict, node after shutdown, comparison.
  json latency = json::object();
  for (const auto& owner : merge_owners(r.latencies)) latency[owner.owner] = latency_summary_json(summarise(owner));
  j["latency"] = latency;
  json workers = json::array();
  for (const auto& w : r.worker_rows)
    workers.push_back({{"name", sanitize_utf8(w.name)},
                       {"requests", w.requests},
                       {"prefill_rows_computed", w.prefill_rows_computed},
                       {"prefill_rows_reused", w.prefill_rows_reused},
                       {"reuse_ratio", optional_number(reuse_ratio(w.prefill_rows_reused, w.prefill_rows_computed))},
                       {"decode_tokens", w.decode_tokens},
                       {"wall_s", w.wall_s}});
  j["worker_rows"] = workers;
  j["exact"] = r.exact;
  j["requests_verified"] = r.requests_verified;
  j["token_mismatches"] = r.token_mismatches;
  j["reused_rows_checked"] = r.reused_rows_checked;
  j["reused_row_mismatches"] = r.reused_row_mismatches;
  j["rows_checked"] = r.rows_checked;
  j["row_mismatches"] = r.row_mismatches;
  j["bounded_rows_checked"] = r.bounded_rows_checked;
  j["bounded_row_max_difference"] = r.bounded_row_max_difference;
  j["first_mismatch"] = sanitize_utf8(r.first_mismatch);
  j["leaked_blocks"] = r.leaked_blocks;
  j["quota_exceeded"] = r.quota_exceeded;
  j["partial_tail_rows_copied"] = r.partial_tail_rows_copied;
  j["refcount_delta"] = r.refcount_delta;
  j["validate_ok"] = r.validate_ok;
  j["operation_errors"] = r.operation_errors;
  if (r.updates.enabled) {
    const UpdatesSummary& u = r.updates;
    j["updates"] = json{{"weights_updates", u.weights_updates},
                        {"adapter_swaps", u.adapter_swaps},
                        {"purges", u.purges},
                        {"failed", u.failed},
                        {"first_failure", sanitize_utf8(u.first_failure)},
                        {"invalidate_p50_us", u.invalidate_p50_us},
                        {"invalidate_p99_us", u.invalidate_p99_us},
                        {"purge_p50_us", u.purge_p50_us},
                        {"purge_p99_us", u.purge_p99_us},
                        {"receipts_drained", u.receipts_drained},
                        {"receipts_revoked", u.receipts_revoked},
                        {"blocks_marked_for_overwrite", u.blocks_marked_for_overwrite},
                        {"requests_on_successor_weights", u.requests_on_successor_weights},
                        {"weight_variants", u.weight_variants},
                        {"stale_generation_refusals", u.stale_generation_refusals},
                        {"namespace_closed_refusals", u.namespace_closed_refusals},
                        {"reauthorizations", u.reauthorizations},
                        {"workers_receipts_revoked", u.workers_receipts_revoked},
                        {"stale_hits", u.stale_hits},
                        {"stale_bytes_read", u.stale_bytes_read},
                        {"stale_checked", u.stale_checked},
                        {"foreign_generation_hits", u.foreign_generation_hits},
                        {"requests_per_s", u.requests_per_s},
                        {"baseline_requests_per_s", u.baseline_requests_per_s},
                        {"throughput_ratio", u.throughput_ratio},
                        {"longest_gap_s", u.longest_gap_s},
                        {"baseline_longest_gap_s", u.baseline_longest_gap_s}};
  }
  j["comparison"] = comparison_json(r);
  j["trace_path"] = sanitize_utf8(r.trace_path);
  return j;
}

nlohmann::json report_document(const RunReport& r) {
  json j = summary_json(r);
  json timeline = json::array();
  for (const auto& s : r.timeline) timeline.push_back(sample_json(s, true));
  j["timeline"] = timeline;
  // One set of bins for every owner (report_latency.hpp), so histograms compare.
  const auto owners = merge_owners(r.latencies);
  const LatencyBins bins = latency_bins(owners);
  json latency = json::object();
  for (const auto& owner : owners) {
    json entry = latency_summary_json(summarise(owner));
    const auto counts = bin_counts(owner.samples_us, bins);
    json histogram = json::array();
    for (size_t k = 0; k < counts.size(); ++k)
      histogram.push_back({{"lo_us", bins.edges_us[k]}, {"hi_us", bins.edges_us[k + 1]}, {"count", counts[k]}});
    entry["histogram"] = {{"scale", "log10, 1-2-5 edges, bin = [lo_us, hi_us)"}, {"bins", histogram}};
    latency[owner.owner] = std::move(entry);
  }
  j["latency"] = latency;
  return j;
}

}  // namespace kvrt::report
