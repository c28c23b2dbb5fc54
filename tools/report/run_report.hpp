#pragma once
// The report of `kvrt run`: what a person reads after a run. The
// run driver fills a RunReport from its workers' results and the node's
// statistics; this module turns it into the terminal summary, the `--json`
// object, and a report directory (report.json, report.md and SVG plots that
// report.md embeds). Pure data in, files out: no actors, no processes.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt::report {

// Byte ledgers of spec 0x02 at one moment [bytes].
struct MemoryLedger {
  uint64_t rectangular_bytes = 0;      // every live request reserved at T_max (the baseline)
  uint64_t request_view_bytes = 0;     // sum over live requests of their blocks x P_a x B_row
  uint64_t unique_physical_bytes = 0;  // distinct referenced blocks x P_a x B_row
  uint64_t pool_bytes = 0;             // provisioned pools
  uint64_t metadata_bytes = 0;         // block tables, descriptors, index entries
};

// One sample of the node while the run goes on.
struct UtilisationSample {
  double t_s = 0;                 // since the workers started [s]
  uint64_t used_blocks = 0;       // live + in-transaction, summed over groups [blocks]
  uint64_t evictable_blocks = 0;  // cached, unreferenced [blocks]
  uint64_t capacity_blocks = 0;   // summed over groups [blocks]
  uint64_t live_requests = 0;
  // Committed rows of referenced blocks, and the rows those blocks hold
  // (blocks x block size), every pool: their ratio is the K/V memory
  // efficiency PagedAttention reports.
  uint64_t valid_rows = 0, allocated_rows = 0;  // [rows]
  MemoryLedger ledger;
};

struct OwnerLatency {
  std::string owner;               // "allocator", "prefix_index", "authorization", ...
  std::vector<double> samples_us;  // receipt latency seen by workers, one per call [us]
};

// One row of `--compare`: the same workload under one reuse mode.
struct ComparisonRow {
  std::string mode;                    // "no_reuse", "hash_chain", "radix", "radix_shared_prefix", "rectangular"
  uint64_t prefill_rows_computed = 0;  // [rows]
  uint64_t decode_kv_bytes_read = 0;   // [bytes]
  uint64_t peak_pool_bytes = 0;        // [bytes]
  double wall_s = 0;                   // [s]
  // Every request served without a typed error. Compare passes skip the
  // no-reuse replay (wall times compare serving alone); the main pass
  // carries the exactness verdict.
  bool complete = false;
};

struct WorkerRow {
  std::string name;
  uint64_t requests = 0;
  uint64_t prefill_rows_computed = 0;
  uint64_t prefill_rows_reused = 0;
  uint64_t decode_tokens = 0;
  double wall_s = 0;
};

// Weights updates, adapter swaps and tenant purges on the live node during
// the pass ([updates] of the run config; 0x01A, 0x0CE).
struct UpdatesSummary {
  bool enabled = false;
  uint64_t weights_updates = 0;  // namespace invalidations, cause weights
  uint64_t adapter_swaps = 0;    // namespace invalidations, cause adapter
  uint64_t purges = 0;           // completed tenant purges
  uint64_t failed = 0;           // admin calls the node refused
  std::string first_failure;
  double invalidate_p50_us = 0, invalidate_p99_us = 0;  // admin call to invalidation receipt [us]
  double purge_p50_us = 0, purge_p99_us = 0;            // purge begin to completion, its receipt's [us]
  uint64_t receipts_drained = 0, receipts_revoked = 0, blocks_marked_for_overwrite = 0;  // the purges'
  // The workers' side.
  uint64_t requests_on_successor_weights = 0;  // admitted under updated weights or adapter
  uint64_t weight_variants = 0;                // weight sets a worker drew besides the configured one (max)
  uint64_t stale_generation_refusals = 0, namespace_closed_refusals = 0, reauthorizations = 0;
  uint64_t workers_receipts_revoked = 0;
  // Reused rows that differ bitwise from the replay under the request's own
  // weights: a hit on K/V of another generation (old weights, old adapter)
  // would be one. Bytes: those rows' K/V bytes.
  uint64_t stale_hits = 0;
  uint64_t stale_bytes_read = 0;
  bool stale_checked = false;
  uint64_t foreign_generation_hits = 0;  // reuse receipts of another generation than the request's grant  // the replay
                                         // ran ([run] verify); without it nothing was compared
  // Throughput during the updates, and in the same workload served again
  // without them ([updates] baseline; 0 when off).
  double requests_per_s = 0, baseline_requests_per_s = 0, throughput_ratio = 0;
  // The longest time no request finished anywhere [s]: a global stall
  // during an update would show here.
  double longest_gap_s = 0, baseline_longest_gap_s = 0;
};

struct RunReport {
  // What ran.
  std::string workload_name;
  std::string workload_origin;
  std::string layout_id;
  std::string prefix_index;  // the node's prefix-reuse owner: "hash_chain" or "radix"
  std::string reuse_policy;  // where a hit may end (0x07D): "full_block" or "immutable_partial_tail"
  std::string started_at;    // ISO 8601, UTC
  uint32_t workers = 0;
  double wall_s = 0;  // workers started .. last worker done [s]

  // Work.
  uint64_t requests = 0;
  uint64_t tokens_requested = 0;                // prompt + generated, every request [tokens]
  uint64_t prompt_tokens = 0;                   // [tokens]
  uint64_t decode_tokens = 0;                   // generated [tokens]
  uint64_t prefill_rows_computed = 0;           // prompt rows the model computed [rows]
  uint64_t prefill_rows_reused = 0;             // prompt rows read from the cache instead [rows]
  uint64_t prefill_rows_forked = 0;             // prompt rows of fork branches, shared by reference (0x05C) [rows]
  uint64_t reused_by_hash_chain = 0;            // of which found by the hash-chain index [rows]
  uint64_t reused_by_radix = 0;                 // of which found by the radix tree [rows]
  uint64_t shared_prefix_rows_read_once = 0;    // shared-prefix execution: rows read once per batch [rows]
  uint64_t shared_prefix_rows_per_request = 0;  // the same rows had each request read them [rows]
  // Where shared-prefix decode ran, and on the node (site "node") what the
  // executor owner executed: one op per layer per batch (0x0BA-0x0BD).
  struct SharedPrefixExecution {
    std::string site = "worker";  // "worker" or "node"
    std::string design = "auto";  // the design the workers asked for
    uint64_t batches = 0;         // decode steps of a group run with shared-prefix execution [batches]
    uint64_t ops = 0, hydragen = 0, chunk_attention = 0, per_request = 0;  // by the design run [operations]
    uint64_t max_levels = 0;        // most shared chunks on one sequence's path [chunks]
    uint64_t multi_level_ops = 0;   // over a tree of more than one shared level [operations]
    uint64_t refusals = 0;          // batches decoded in the worker after the node refused [batches]
    uint64_t rows_read = 0;         // committed rows the node's design read, per batch [rows]
    uint64_t rows_per_request = 0;  // the same, had each request read its own [rows]
  } shared_execution;
  // Where the node's pools were ([run] pool_backend) and whether the workers
  // computed over a host copy of them ([run] staged_pools, always on GPU
  // pools): the token rows moved from the pools into the copies and back.
  struct Pools {
    std::string backend = "shm";  // "shm" or "cuda"
    bool staged = false;
    uint64_t rows_loaded = 0;  // [rows]
    uint64_t rows_stored = 0;  // [rows]
  } pools;
  // The session tier ([run] session_tier, 0x0CC): chat histories saved when
  // a turn ended, turns resumed with rows past their prefix hit loaded from
  // it, resumes refused, and the time loading took against what computing
  // those rows would have cost at the run's own prefill rate.
  struct SessionTier {
    bool used = false;
    uint64_t saves = 0, saved_bytes = 0;          // [histories], [bytes]
    uint64_t turns_resumed = 0, rows_loaded = 0;  // [requests], [rows]
    uint64_t resume_refusals = 0;                 // [requests]
    double load_s = 0, save_s = 0;                // [s], summed over workers
    double recompute_s = 0;                       // rows_loaded at the run's prefill seconds per computed row [s]
  } session_tier;
  // Templated prompts (Prompt Cache, 0x0CB): assembled through the node's
  // module store; modules reused (rows copied from the store's blocks) or
  // computed alone at their declared positions (a miss: never computed with
  // those parameters, or incompatible: other tokens, a moved module, another
  // schema generation or model) and published; the copying time against
  // what computing the reused rows would have cost at the run's prefill rate.
  struct PromptCache {
    bool used = false;
    uint64_t requests = 0;                                      // [requests]
    uint64_t modules_reused = 0, module_rows_reused = 0;        // [modules], [rows]
    uint64_t modules_computed = 0, module_rows_computed = 0;    // [modules], [rows]
    uint64_t modules_published = 0;                             // [modules]
    uint64_t misses_not_computed = 0, misses_incompatible = 0;  // [modules]
    uint64_t stale_schema = 0;  // calls refused for an older schema generation: every module computed [calls]
    // The node's misses by reason (its reuse_prompt_missed_<reason> statistics).
    std::vector<std::pair<std::string, uint64_t>> node_misses;
    double copy_s = 0;       // [s], summed over workers
    double recompute_s = 0;  // module_rows_reused at the run's prefill seconds per computed row [s]
  } prompt_cache;
  // Virtual reservations (a layout with physical_mode = "virtual_pages",
  // vAttention 0x06): what the mapper owner did for the workers, summed.
  struct VirtualPages {
    bool used = false;
    uint64_t steps = 0, steps_infeasible = 0;  // [steps]
    uint64_t pages_mapped = 0;                 // page groups, every tensor counted [pages]
    uint64_t bundles_reclaimed = 0;            // inactive owners' page bundles moved [bundles]
    uint64_t retained_slot_reuses = 0;         // slots bound with a retained mapping [slots]
    uint64_t retained_pages_reused = 0;        // [pages per tensor]
    uint64_t reserved_bytes = 0;               // M_VA [bytes of address space]
    uint64_t pool_bytes = 0;                   // M_phys,pool [bytes]
    uint64_t mapped_peak_bytes = 0;            // largest M_mapped one worker saw [bytes]
    uint64_t active_valid_at_peak_bytes = 0;   // M_active,valid at that step [bytes]
    uint64_t pages_mapped_ahead = 0;           // mapped in the workers' views before use, in the background [pages]
    uint64_t tier_refusals = 0;  // prompts the block pools refused at admission: not reused, not published [requests]
    double map_step_p50_us = 0, map_step_p99_us = 0;  // mapper step round trip, map before use [us]
    // The node's own count (its mapper owner's statistics after the pass):
    // page bundles (one page of each of the 2L tensors) mapped and unmapped.
    uint64_t node_bundle_maps = 0, node_bundle_unmaps = 0;
    // The node's map-ahead (0x06D, [mapper] map_ahead): page maps its steps
    // found already done by the background thread, and those they made
    // themselves [OS page maps].
    uint64_t node_map_ahead_hits = 0, node_map_ahead_foreground_maps = 0;
    // The workers' view mapping: work = synchronous mapping + background
    // mapping; visible = synchronous mapping + waits for the background;
    // hidden fraction = 1 - visible / work (0x06D). Negative never: 0 floor.
    double view_map_work_us = 0, view_map_visible_us = 0;
    double hidden_fraction() const {
      return view_map_work_us > 0 ? std::max(0.0, 1.0 - view_map_visible_us / view_map_work_us) : 0.0;
    }
  } virtual_pages;

  // Reuse funnel (0x0CF): stage counts in funnel order, then rejection buckets.
  std::vector<std::pair<std::string, uint64_t>> funnel_stages;
  std::vector<std::pair<std::string, uint64_t>> rejection_buckets;
  // The node's own view of the same attempts
  // (services/reuse/reuse_funnel_counters.hpp), read from its owners after the pass: every
  // lookup it answered, the candidates among them, the candidates an
  // allocation took by reference, and those the generation fence refused.
  // An engine records a hit exactly when the node leases its candidate, so
  // node_reuse_leased equals the engines' executed stage.
  uint64_t node_reuse_requests = 0;
  uint64_t node_reuse_candidates = 0;
  uint64_t node_reuse_leased = 0;
  uint64_t node_reuse_not_current = 0;
  // Candidates whose allocation was refused for the namespace's block quota
  // (the funnel's own bucket), and every allocation or append the quotas
  // refused (docs/operations.md, "Block quotas"); 0 without quotas.
  uint64_t node_reuse_quota_exceeded = 0;
  uint64_t quota_exceeded = 0;
  // Rows the allocator copied out of partial tails into the hits' own
  // blocks (the copy-rows intent of 0x07D), part of prefill_rows_reused [rows].
  uint64_t partial_tail_rows_copied = 0;

  // Memory (0x02).
  MemoryLedger peak_ledger;     // at the sample of peak used blocks
  double pool_utilisation = 0;  // peak used / capacity, in [0, 1]
  std::vector<UtilisationSample> timeline;

  std::vector<OwnerLatency> latencies;
  std::vector<WorkerRow> worker_rows;

  // Exactness verdict.
  bool exact = false;
  uint64_t requests_verified = 0;    // compared with a no-reuse, no-sharing run
  uint64_t token_mismatches = 0;     // requests whose generated tokens differ
  uint64_t reused_rows_checked = 0;  // reused K/V rows compared bitwise
  uint64_t reused_row_mismatches = 0;
  uint64_t rows_checked = 0;              // every cached row of every request, reused or computed [rows]
  uint64_t row_mismatches = 0;            // of those, rows that differ (bitwise, or past the bound below)
  uint64_t bounded_rows_checked = 0;      // shared-prefix decode rows, compared within a bound [rows]
  double bounded_row_max_difference = 0;  // largest relative difference among them
  std::string first_mismatch;             // empty when exact

  // Node after shutdown.
  int64_t leaked_blocks = 0;
  int64_t refcount_delta = 0;
  bool validate_ok = false;
  uint64_t operation_errors = 0;

  UpdatesSummary updates;                 // enabled only with [updates]
  std::vector<ComparisonRow> comparison;  // empty unless --compare
  // `kvrt run --compare-physical LAYOUT`: the same workload served again
  // under another layout's physical mode (paged blocks against virtual
  // pages, 0x05 / 0x06), both verified. Row 0 is the main pass.
  struct PhysicalModeRow {
    std::string layout_id;
    std::string physical_mode;  // "paged_blocks", "virtual_pages"
    bool exact = false;
    double wall_s = 0;
    uint64_t prefill_rows_computed = 0, prefill_rows_reused = 0;
    uint64_t rows_checked = 0;
    uint64_t peak_unique_physical_bytes = 0;  // paged: the peak ledger's unique physical bytes
    VirtualPages virtual_pages;               // virtual: what the mapper did
  };
  std::vector<PhysicalModeRow> physical_modes;
  std::string trace_path;  // empty unless --trace
};

// Percentile of samples by nearest rank (p in [0, 100]); 0 for no samples.
double percentile(std::vector<double> samples, double p);

// The `--json` object: every field above except the raw timeline and
// samples, with at least exact, leaked_blocks, prefill_rows_computed,
// prefill_rows_reused, pool_utilisation, requests, workers.
nlohmann::json summary_json(const RunReport& report);
// The terminal summary (plain text, about 30 lines).
std::string summary_text(const RunReport& report);
// Writes report.json (summary_json plus timeline and latency percentiles),
// report.md (readable Markdown embedding the plots), utilisation.svg,
// funnel.svg and latency.svg into `dir` (created if missing). Errors:
// io naming the file.
Status write_report(const RunReport& report, const std::string& dir);

}  // namespace kvrt::report
