#pragma once
// From what a `kvrt run` pass observed (its workers' results and the node's
// statistics) to the RunReport of services/report. CAF-free.
#include <optional>
#include <string>
#include <vector>

#include "actors/client.hpp"
#include "engine/engine_worker.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "tools/report/run_report.hpp"
#include "tools/run/run_config.hpp"
#include "tools/run/update_campaign.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {

// One pass of a workload through a fresh node and fresh workers.
struct RunPass {
  std::string mode;                                     // "run", "no_reuse", "hash_chain", ...
  PrefixIndexKind index = PrefixIndexKind::hash_chain;  // the node's prefix-reuse owner
  std::vector<EngineResult> results;                    // one per worker, in worker order
  std::vector<report::UtilisationSample> timeline;
  NodeStats final_stats;                // after every worker exited, before shutdown
  std::vector<std::string> pool_names;  // the node's shared-memory segments
  uint32_t segments_left = 0;           // of those, still present after shutdown
  double wall_s = 0;                    // workers started .. all exited [s]
  double longest_gap_s = 0;             // the longest time no worker finished a request [s]
  // The pass's [updates] calls, in order; absent when the pass ran none.
  std::optional<std::vector<UpdateEvent>> updates;
};

// One timeline sample from the node's statistics: blocks per state summed
// over groups, and the byte ledgers of 0x02 with each group's B_row (the
// rectangular baseline reserves T_max rows for every live request).
report::UtilisationSample sample_from_stats(const NodeStats& stats, const CacheLayoutManifest& layout,
                                            uint32_t t_max_tokens, double t_s);

// The report of the main pass: sums of the workers' results, the funnel,
// peak memory, latencies, the exactness verdict (every request verified, no
// token or row mismatch, no operation error, nothing left in the node).
report::RunReport build_run_report(const RunPass& pass, const RunConfig& config, const workload::Workload& workload,
                                   const CacheLayoutManifest& layout);

// The updates section: the main pass's events and its workers' counters,
// against the baseline pass (the same workload without updates) when one ran.
report::UpdatesSummary updates_summary(const RunPass& pass, const RunPass* baseline, const CacheLayoutManifest& layout);

// The `--compare` table: one row per pass, plus the rectangular reservation
// baseline for memory (peak live requests x T_max rows).
std::vector<report::ComparisonRow> comparison_rows(const std::vector<RunPass>& passes,
                                                   const workload::Workload& workload);

// Joins node-trace.json and worker-<i>-trace.json of a pass directory into
// one Chrome trace-event file (open it in Perfetto).
Status merge_run_traces(const std::string& dir, uint32_t workers, const std::string& out_path);

}  // namespace kvrt
