// From a `kvrt run` pass to its RunReport. See run_report_builder.hpp.
#include "tools/run/run_report_builder.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "schema/allocator_types.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "tools/ledger/kvrt_record_sizes.hpp"
#include "tools/ledger/metadata_ledger.hpp"
#include "tools/report/report_latency.hpp"

namespace kvrt {

namespace {

int64_t stat(const NodeStats& s, const std::string& owner, const std::string& name) {
  return s.value(owner, name).value_or(0);
}

// What computing `rows` prompt rows would have cost at the worker's own
// prefill rate (its forward time per prompt row it computed) [s].
double at_prefill_rate(const EngineResult& w, uint64_t rows) {
  if (w.prefill_rows_computed == 0) return 0;
  return static_cast<double>(rows) * static_cast<double>(w.prefill_compute_us) * 1e-6 /
         static_cast<double>(w.prefill_rows_computed);
}

}  // namespace

report::UtilisationSample sample_from_stats(const NodeStats& stats, const CacheLayoutManifest& layout,
                                            uint32_t t_max_tokens, double t_s) {
  report::UtilisationSample out;
  out.t_s = t_s;
  const uint64_t P = layout.allocator_block_size;
  MetadataCounts counts;
  for (size_t g = 0; g < layout.cache_groups.size(); ++g) {
    const std::string p = "pool" + std::to_string(g) + "_";
    const uint64_t block_bytes = P * layout.cache_groups[g].row_bytes();  // [bytes / block]
    const auto used = static_cast<uint64_t>(stat(stats, "allocator", p + "live_blocks") +
                                            stat(stats, "allocator", p + "in_transaction_blocks"));
    const auto capacity = static_cast<uint64_t>(stat(stats, "allocator", p + "capacity_blocks"));
    const auto view = static_cast<uint64_t>(stat(stats, "allocator", p + "request_view_blocks"));
    out.used_blocks += used;
    out.evictable_blocks += static_cast<uint64_t>(stat(stats, "allocator", p + "evictable_blocks"));
    out.capacity_blocks += capacity;
    out.ledger.request_view_bytes += view * block_bytes;
    out.ledger.unique_physical_bytes += used * block_bytes;
    out.ledger.pool_bytes += capacity * block_bytes;
    counts.request_block_refs += view;
    counts.pool_blocks += capacity;
    counts.free_queue_entries += static_cast<uint64_t>(stat(stats, "allocator", p + "free_blocks"));
  }
  out.live_requests = static_cast<uint64_t>(stat(stats, "allocator", "live_requests"));
  out.valid_rows = static_cast<uint64_t>(std::max<int64_t>(0, stat(stats, "allocator", "live_valid_rows")));
  out.allocated_rows = static_cast<uint64_t>(std::max<int64_t>(0, stat(stats, "allocator", "live_allocated_rows")));
  out.ledger.rectangular_bytes = out.live_requests * t_max_tokens * layout.row_bytes();
  counts.live_requests = out.live_requests;
  counts.cached_hashes = static_cast<uint64_t>(stat(stats, "prefix_index", "cached_block_entries"));
  out.ledger.metadata_bytes = compute_metadata_ledger(kvrt_record_sizes(), counts).total_bytes;
  return out;
}

report::RunReport build_run_report(const RunPass& pass, const RunConfig& config, const workload::Workload& workload,
                                   const CacheLayoutManifest& layout) {
  report::RunReport r;
  r.workload_name = workload.name;
  r.workload_origin = workload.origin;
  r.layout_id = layout.manifest_id;
  r.prefix_index = std::string(name_of(pass.index));
  r.reuse_policy = std::string(config_name_of(config.reuse_policy));
  r.workers = config.workers;
  r.shared_execution.site = std::string(to_string(config.shared_prefix_site));
  r.shared_execution.design = std::string(to_string(config.shared_prefix_design));
  r.pools.backend = std::string(name_of(config.pool_backend));
  r.pools.staged = config.staged_pools || config.pool_backend == PoolBackend::cuda;
  r.wall_s = pass.wall_s;
  FunnelCounts funnel;
  std::array<uint64_t, kReuseBucketCount> rejections{};
  report::OwnerLatency allocator{"allocator", {}}, prefix{"prefix_index", {}}, authorization{"authorization", {}},
      executor{"executor", {}}, mapper_step{"mapper (step, map before use)", {}}, view_map{"worker view mapping", {}};
  std::string first_error;
  for (const EngineResult& w : pass.results) {
    r.requests += w.requests;
    r.prompt_tokens += w.prompt_tokens;
    r.decode_tokens += w.decode_tokens;
    r.prefill_rows_computed += w.prefill_rows_computed;
    r.prefill_rows_reused += w.prefill_rows_reused;
    r.prefill_rows_forked += w.prefill_rows_forked;
    r.shared_prefix_rows_read_once += w.shared_prefix_rows_read_once;
    r.shared_prefix_rows_per_request += w.shared_prefix_rows_per_request;
    report::RunReport::SharedPrefixExecution& x = r.shared_execution;
    x.batches += w.shared_prefix_batches;
    x.ops += w.node_shared_ops;
    x.hydragen += w.node_shared_hydragen;
    x.chunk_attention += w.node_shared_chunk_attention;
    x.per_request += w.node_shared_per_request;
    x.max_levels = std::max(x.max_levels, w.node_shared_max_levels);
    x.multi_level_ops += w.node_shared_multi_level;
    x.refusals += w.node_shared_refusals;
    x.rows_read += w.node_shared_rows_read;
    x.rows_per_request += w.node_shared_rows_per_request;
    r.pools.rows_loaded += w.staged_rows_loaded;
    r.pools.rows_stored += w.staged_rows_stored;
    report::RunReport::SessionTier& tier = r.session_tier;
    tier.used = tier.used || config.session_tier;
    tier.saves += w.tier_saves;
    tier.saved_bytes += w.tier_saved_bytes;
    tier.turns_resumed += w.tier_turns_resumed;
    tier.rows_loaded += w.tier_rows_loaded;
    tier.resume_refusals += w.tier_resume_refusals;
    tier.load_s += static_cast<double>(w.tier_load_us) * 1e-6;
    tier.save_s += static_cast<double>(w.tier_save_us) * 1e-6;
    tier.recompute_s += at_prefill_rate(w, w.tier_rows_loaded);
    report::RunReport::PromptCache& pc = r.prompt_cache;
    pc.used = pc.used || w.prompt_requests > 0;
    pc.requests += w.prompt_requests;
    pc.modules_reused += w.prompt_modules_reused;
    pc.module_rows_reused += w.prompt_module_rows_reused;
    pc.modules_computed += w.prompt_modules_computed;
    pc.module_rows_computed += w.prompt_module_rows_computed;
    pc.modules_published += w.prompt_modules_published;
    pc.misses_not_computed += w.prompt_misses_not_computed;
    pc.misses_incompatible += w.prompt_misses_incompatible;
    pc.stale_schema += w.prompt_stale_schema;
    pc.copy_s += static_cast<double>(w.prompt_copy_us) * 1e-6;
    pc.recompute_s += at_prefill_rate(w, w.prompt_module_rows_reused);
    report::RunReport::VirtualPages& v = r.virtual_pages;
    v.steps += w.virtual_steps;
    v.steps_infeasible += w.virtual_steps_infeasible;
    v.pages_mapped += w.virtual_pages_mapped;
    v.bundles_reclaimed += w.virtual_bundles_reclaimed;
    v.retained_slot_reuses += w.virtual_retained_slot_reuses;
    v.retained_pages_reused += w.virtual_retained_pages_reused;
    v.reserved_bytes = std::max(v.reserved_bytes, w.virtual_reserved_bytes);
    v.pool_bytes = std::max(v.pool_bytes, w.virtual_pool_bytes);
    if (w.virtual_mapped_peak_bytes >= v.mapped_peak_bytes) {
      v.mapped_peak_bytes = w.virtual_mapped_peak_bytes;
      v.active_valid_at_peak_bytes = w.virtual_active_valid_at_peak_bytes;
    }
    v.pages_mapped_ahead += w.virtual_pages_mapped_ahead;
    v.tier_refusals += w.virtual_tier_refusals;
    // Work: every page mapping, synchronous or in the background; visible:
    // the synchronous mappings plus every wait for a background batch [us].
    double synchronous = 0;
    for (double us : w.view_map_us) synchronous += us;
    v.view_map_visible_us += synchronous + w.view_map_wait_us_total;
    v.view_map_work_us += synchronous + w.view_map_ahead_us_total;
    mapper_step.samples_us.insert(mapper_step.samples_us.end(), w.mapper_step_us.begin(), w.mapper_step_us.end());
    view_map.samples_us.insert(view_map.samples_us.end(), w.view_map_us.begin(), w.view_map_us.end());
    r.bounded_rows_checked += w.bounded_rows_checked;
    r.bounded_row_max_difference = std::max(r.bounded_row_max_difference, w.bounded_row_max_difference);
    r.requests_verified += w.requests_verified;
    r.token_mismatches += w.token_mismatches;
    r.reused_rows_checked += w.reused_rows_checked;
    r.reused_row_mismatches += w.reused_row_mismatches;
    r.rows_checked += w.rows_checked;
    r.row_mismatches += w.row_mismatches;
    r.operation_errors += w.operation_errors;
    if (r.first_mismatch.empty()) r.first_mismatch = w.first_mismatch;
    if (first_error.empty() && !w.first_error.empty()) first_error = w.worker + ": " + w.first_error;
    for (size_t k = 0; k < kFunnelStageCount; ++k) funnel.stage[k] += w.funnel.stage[k];
    for (size_t b = 0; b < kReuseBucketCount; ++b) rejections[b] += w.rejections[b];
    allocator.samples_us.insert(allocator.samples_us.end(), w.allocator_us.begin(), w.allocator_us.end());
    prefix.samples_us.insert(prefix.samples_us.end(), w.prefix_us.begin(), w.prefix_us.end());
    authorization.samples_us.insert(authorization.samples_us.end(), w.authorize_us.begin(), w.authorize_us.end());
    executor.samples_us.insert(executor.samples_us.end(), w.executor_us.begin(), w.executor_us.end());
    r.worker_rows.push_back(report::WorkerRow{w.worker, w.requests, w.prefill_rows_computed, w.prefill_rows_reused,
                                              w.decode_tokens, w.wall_s});
  }
  r.tokens_requested = r.prompt_tokens + r.decode_tokens;
  // One index serves a pass: every reused row was found by it.
  (pass.index == PrefixIndexKind::radix ? r.reused_by_radix : r.reused_by_hash_chain) = r.prefill_rows_reused;
  for (size_t k = 0; k < kFunnelStageCount; ++k)
    r.funnel_stages.emplace_back(std::string(to_string(static_cast<FunnelStage>(k))), funnel.stage[k]);
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    r.rejection_buckets.emplace_back(std::string(to_string(static_cast<ReuseBucket>(b))), rejections[b]);
  r.latencies = {std::move(allocator), std::move(prefix), std::move(authorization)};
  // Only a pass that executed on the node has executor round trips to show.
  if (!executor.samples_us.empty()) r.latencies.push_back(std::move(executor));
  r.virtual_pages.used = layout.physical_mode == PhysicalMode::virtual_pages;
  if (r.virtual_pages.used) {
    const report::OwnerLatencySummary step = report::summarise(mapper_step);
    r.virtual_pages.map_step_p50_us = step.p50_us;
    r.virtual_pages.map_step_p99_us = step.p99_us;
    r.virtual_pages.node_bundle_maps = static_cast<uint64_t>(stat(pass.final_stats, "mapper", "bundle_maps"));
    r.virtual_pages.node_bundle_unmaps = static_cast<uint64_t>(stat(pass.final_stats, "mapper", "bundle_unmaps"));
    r.virtual_pages.node_map_ahead_hits = static_cast<uint64_t>(stat(pass.final_stats, "mapper", "map_ahead_hits"));
    r.virtual_pages.node_map_ahead_foreground_maps =
        static_cast<uint64_t>(stat(pass.final_stats, "mapper", "map_ahead_foreground_maps"));
    r.latencies.push_back(std::move(mapper_step));
    r.latencies.push_back(std::move(view_map));
  }

  r.timeline = pass.timeline;
  for (const report::UtilisationSample& s : pass.timeline) {
    if (s.capacity_blocks == 0) continue;
    const double u = static_cast<double>(s.used_blocks) / static_cast<double>(s.capacity_blocks);
    if (u >= r.pool_utilisation) {
      r.pool_utilisation = u;
      r.peak_ledger = s.ledger;
    }
  }
  // The samples are periodic and can miss a short peak; the allocator keeps
  // each pool's exact high-water mark of live blocks.
  for (size_t g = 0; g < layout.cache_groups.size(); ++g) {
    const std::string p = "pool" + std::to_string(g) + "_";
    const int64_t capacity = stat(pass.final_stats, "allocator", p + "capacity_blocks");
    if (capacity > 0)
      r.pool_utilisation = std::max(r.pool_utilisation,
                                    static_cast<double>(stat(pass.final_stats, "allocator", p + "peak_live_blocks")) /
                                        static_cast<double>(capacity));
  }

  const NodeReuseFunnel node_funnel = node_reuse_funnel(pass.final_stats.owners);
  r.node_reuse_requests = node_funnel.requests;
  r.node_reuse_candidates = node_funnel.candidates;
  r.node_reuse_leased = node_funnel.leased;
  r.node_reuse_not_current = node_funnel.candidates - node_funnel.current;
  r.node_reuse_quota_exceeded = node_funnel.quota_exceeded;
  r.quota_exceeded = static_cast<uint64_t>(std::max<int64_t>(0, stat(pass.final_stats, "allocator", "quota_exceeded")));
  r.partial_tail_rows_copied =
      static_cast<uint64_t>(std::max<int64_t>(0, stat(pass.final_stats, "allocator", "partial_tail_rows_copied")));

  if (r.prompt_cache.used)
    for (const OwnerStats& o : pass.final_stats.owners)
      for (const StatValue& v : o.values)
        if (o.owner == "node" && v.name.starts_with("reuse_prompt_missed_"))
          r.prompt_cache.node_misses.emplace_back(v.name.substr(std::string_view("reuse_prompt_missed_").size()),
                                                  static_cast<uint64_t>(std::max<int64_t>(0, v.value)));
  r.leaked_blocks = stat(pass.final_stats, "allocator", "leaked_blocks");
  r.refcount_delta = stat(pass.final_stats, "allocator", "refcount_delta");
  r.validate_ok = !pass.final_stats.owners.empty();
  for (const OwnerStats& o : pass.final_stats.owners) r.validate_ok = r.validate_ok && o.validate_ok;
  const int64_t live_requests = stat(pass.final_stats, "allocator", "live_requests");
  // The radix index's cached pages are the node's own leases, not a
  // worker's: what is left after every worker released is the rest.
  const int64_t live_leases =
      stat(pass.final_stats, "allocator", "live_leases") - stat(pass.final_stats, "allocator", "node_leases");

  // The verdict names the first thing that is not exact.
  const uint64_t expected = workload.request_count();
  std::string why;
  if (!config.verify)
    why = "verification is off ([run] verify = false)";
  else if (r.requests != expected)
    why = std::to_string(r.requests) + " of " + std::to_string(expected) + " requests were served";
  else if (r.requests_verified != r.requests)
    why = std::to_string(r.requests - r.requests_verified) + " requests could not be replayed";
  else if (!r.first_mismatch.empty())
    why = r.first_mismatch;
  else if (r.operation_errors != 0)
    why = std::to_string(r.operation_errors) + " operation errors; first: " + first_error;
  else if (r.leaked_blocks != 0 || r.refcount_delta != 0 || live_requests != 0 || live_leases != 0)
    why = "the node still holds state after every worker released: " + std::to_string(live_requests) + " requests, " +
          std::to_string(live_leases) + " leases, " + std::to_string(r.leaked_blocks) +
          " leaked blocks, refcount delta " + std::to_string(r.refcount_delta);
  else if (!r.validate_ok)
    why = "an owner's validate() failed after the run";
  else if (pass.segments_left != 0)
    why = std::to_string(pass.segments_left) + " shared-memory segments were left after shutdown";
  r.updates = updates_summary(pass, nullptr, layout);
  if (why.empty() && r.updates.failed != 0)
    why = std::to_string(r.updates.failed) + " updates were refused by the node; first: " + r.updates.first_failure;
  r.exact = why.empty();
  if (!r.exact && r.first_mismatch.empty()) r.first_mismatch = why;
  return r;
}

report::UpdatesSummary updates_summary(const RunPass& pass, const RunPass* baseline,
                                       const CacheLayoutManifest& layout) {
  report::UpdatesSummary u;
  if (!pass.updates) return u;
  u.enabled = true;
  std::vector<double> invalidate_us, purge_us;
  for (const UpdateEvent& e : *pass.updates) {
    if (!e.error.empty()) {
      if (u.failed++ == 0) u.first_failure = std::string(to_string(e.kind)) + " " + e.namespace_name + ": " + e.error;
      continue;
    }
    switch (e.kind) {
      case UpdateKind::weights:
        ++u.weights_updates;
        invalidate_us.push_back(e.call_us);
        break;
      case UpdateKind::adapter:
        ++u.adapter_swaps;
        invalidate_us.push_back(e.call_us);
        break;
      case UpdateKind::purge:
        ++u.purges;
        purge_us.push_back(static_cast<double>(e.purge_us));
        u.receipts_drained += e.receipts_drained;
        u.receipts_revoked += e.receipts_revoked;
        u.blocks_marked_for_overwrite += e.blocks_marked_for_overwrite;
        break;
    }
  }
  u.invalidate_p50_us = report::percentile(invalidate_us, 50);
  u.invalidate_p99_us = report::percentile(invalidate_us, 99);
  u.purge_p50_us = report::percentile(purge_us, 50);
  u.purge_p99_us = report::percentile(purge_us, 99);
  auto requests_of = [](const RunPass& p) {
    uint64_t n = 0;
    for (const EngineResult& w : p.results) n += w.requests;
    return n;
  };
  for (const EngineResult& w : pass.results) {
    u.requests_on_successor_weights += w.requests_on_successor_weights;
    u.weight_variants = std::max(u.weight_variants, w.weight_variants);
    u.stale_generation_refusals += w.stale_generation_refusals;
    u.namespace_closed_refusals += w.namespace_closed_refusals;
    u.reauthorizations += w.reauthorizations;
    u.workers_receipts_revoked += w.receipts_revoked;
    u.stale_hits += w.reused_row_mismatches;
    u.foreign_generation_hits += w.foreign_generation_hits;
    u.stale_checked = u.stale_checked || w.requests_verified > 0;
  }
  u.stale_bytes_read = u.stale_hits * layout.row_bytes();
  u.longest_gap_s = pass.longest_gap_s;
  if (pass.wall_s > 0) u.requests_per_s = static_cast<double>(requests_of(pass)) / pass.wall_s;
  if (baseline != nullptr) {
    if (baseline->wall_s > 0)
      u.baseline_requests_per_s = static_cast<double>(requests_of(*baseline)) / baseline->wall_s;
    if (u.baseline_requests_per_s > 0) u.throughput_ratio = u.requests_per_s / u.baseline_requests_per_s;
    u.baseline_longest_gap_s = baseline->longest_gap_s;
  }
  return u;
}

std::vector<report::ComparisonRow> comparison_rows(const std::vector<RunPass>& passes,
                                                   const workload::Workload& workload) {
  std::vector<report::ComparisonRow> rows;
  uint64_t rectangular_peak = 0;
  for (const RunPass& pass : passes) {
    report::ComparisonRow row;
    row.mode = pass.mode;
    row.wall_s = pass.wall_s;
    uint64_t requests = 0, errors = 0;
    for (const EngineResult& w : pass.results) {
      row.prefill_rows_computed += w.prefill_rows_computed;
      row.decode_kv_bytes_read += w.decode_kv_bytes_read;
      requests += w.requests;
      errors += w.operation_errors;
    }
    for (const report::UtilisationSample& s : pass.timeline) {
      row.peak_pool_bytes = std::max(row.peak_pool_bytes, s.ledger.unique_physical_bytes);
      rectangular_peak = std::max(rectangular_peak, s.ledger.rectangular_bytes);
    }
    row.complete = requests == workload.request_count() && errors == 0;
    rows.push_back(row);
  }
  if (!rows.empty()) {
    report::ComparisonRow rect = rows.front();  // no reuse: every prompt row computed
    rect.mode = "rectangular";
    rect.peak_pool_bytes = rectangular_peak;
    rect.wall_s = 0;
    rows.push_back(rect);
  }
  return rows;
}

Status merge_run_traces(const std::string& dir, uint32_t workers, const std::string& out_path) {
  nlohmann::json merged = {{"displayTimeUnit", "ns"}, {"traceEvents", nlohmann::json::array()}};
  std::vector<std::string> inputs{dir + "/node-trace.json"};
  for (uint32_t w = 0; w < workers; ++w) inputs.push_back(dir + "/worker-" + std::to_string(w) + "-trace.json");
  for (const std::string& path : inputs) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::io, "cannot read trace " + path, path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("traceEvents"))
      return make_error(ErrorCode::io, path + " is not a trace-event file", path);
    for (const auto& e : j["traceEvents"]) merged["traceEvents"].push_back(e);
  }
  std::ofstream out(out_path);
  out << merged.dump() << "\n";
  if (!out) return make_error(ErrorCode::io, "cannot write " + out_path, out_path);
  return Status::success();
}

}  // namespace kvrt
