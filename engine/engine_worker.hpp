#pragma once
// One worker of `kvrt run`: an engine loop that serves its share
// of a workload through a node, with the reference model computing real K/V
// into the node's shared-memory pools. CAF-free: it talks to the node only
// through kvrt::Client, like an inference engine would.
//
// Per request (the engine loop of `kvrt run`): prefix match in the request's
// namespace, allocate with the hit, prefill the suffix (the model writes the
// suffix rows at the receipt's blocks and attends over the reused prefix
// read from the pools), commit the rows, decode token by token (batched
// appends, one batched forward, batched commits; copy-on-write of a shared
// tail happens in the allocator), fork the branches of a sampling job,
// publish the request's full blocks, release.
//
// Exactness (the verdict of `kvrt run`): before a finished request is released
// the worker replays it with no reuse and no sharing in a private cache
// (model::LocalModelKvCache): the same prompt prefilled from row 0, the same
// number of tokens decoded. The generated tokens must be identical, and every
// cached row of the request (reused rows counted separately) must be bitwise
// equal to the recomputed row.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/reference_model.hpp"
#include "engine/shared_prefix_site.hpp"
#include "services/common/result.hpp"
#include "services/session/node_descriptor.hpp"
#include "services/telemetry/reuse_funnel.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {

class ChromeTraceRecorder;

struct EngineProgress {
  uint64_t requests_done = 0;
  uint64_t requests_total = 0;
  uint64_t rows_computed = 0;  // prefill + decode rows the model computed [rows]
};

struct EngineOptions {
  std::string worker_name = "worker";
  std::string token_hex;
  const workload::Workload* workload = nullptr;
  uint32_t worker_index = 0;  // this worker's share: jobs_for_worker(index, workers)
  uint32_t workers = 1;
  // Each worker serves one tenant (jobs_for_tenant_worker): a node with
  // pools per trust domain hands a session one domain's pools.
  bool one_tenant_per_worker = false;
  model::ModelConfig model;
  uint32_t in_flight = 8;     // requests batched per iteration [requests]
  bool reuse = true;          // false: no lookups and no publication (the no-reuse baseline)
  bool verify = true;         // replay every request without reuse and compare
  bool shared_prefix = true;  // decode requests that share physical prefix blocks together (0x0BC)
  // Chat conversations through the node's session tier (a node with [tier],
  // 0x0CC): a turn that ends saves the conversation's history; the next
  // turn resumes it and prefills only the rows its hit and the history do
  // not cover.
  bool session_tier = false;
  SharedPrefixSite shared_prefix_site = SharedPrefixSite::worker;
  // The design the node runs (node site only): auto lets the node choose
  // (ChunkAttention for a tree of more than one shared level, else Hydragen).
  SharedPrefixDesign shared_prefix_design = SharedPrefixDesign::auto_;
  // The session lost (node_lost, session_ended: the node died or ended it):
  // true, the rest of this worker's share is served on its private path,
  // every request prefilled from row 0 in a private cache with no reuse
  // (the admitted ones again from their prompt: their blocks went with the
  // node); false, the worker stops with that error.
  bool serve_privately_on_loss = true;
  // Where a restarted node's descriptor appears, and the principal whose
  // token file it writes (empty: no reconnect). While the session is lost,
  // the worker looks there between privately served requests, and once a
  // new node serves it, goes on through that node (its pools, its index:
  // nothing of the old node's cache survives).
  std::string reconnect_descriptor;
  std::string reconnect_principal;
  // Told when the session was lost, before anything is served privately.
  std::function<void(const Error&)> on_session_lost;
  std::function<void(const EngineProgress&)> on_progress;
  ChromeTraceRecorder* trace = nullptr;
  bool channel_only = false;  // sessions open and run on the session channel alone (ClientOptions)
  // Compute over a host copy of the node's pools and move rows through the
  // pools' store (engine/staged_model_kv_cache.hpp), as pools in GPU memory
  // require (there it is on whatever this says); on shared-memory pools it
  // runs the same moves on the CPU.
  bool staged_pools = false;
};

struct EngineResult {
  std::string worker;
  uint64_t requests = 0;               // finished and released
  uint64_t requests_total = 0;         // this worker's share
  uint64_t prompt_tokens = 0;          // [tokens]
  uint64_t decode_tokens = 0;          // generated [tokens]
  uint64_t prefill_rows_computed = 0;  // [rows]
  uint64_t prefill_rows_reused = 0;    // prompt rows served by the hash-chain index [rows]
  uint64_t prefill_rows_forked = 0;    // prompt rows of fork branches, held by reference [rows]
  // The session tier: histories saved, turns resumed and the rows they
  // loaded (past each turn's hit), resumes refused, and the time spent
  // loading against the prefill time of the rows computed, for the cost of
  // a row recomputed in the same run.
  uint64_t tier_saves = 0;            // [histories]
  uint64_t tier_saved_bytes = 0;      // [bytes]
  uint64_t tier_turns_resumed = 0;    // [requests]
  uint64_t tier_rows_loaded = 0;      // [rows]
  uint64_t tier_resume_refusals = 0;  // [requests]
  uint64_t tier_load_us = 0;          // resume calls and row writes [us]
  uint64_t tier_save_us = 0;          // row reads and save calls [us]
  uint64_t prefill_compute_us = 0;    // the prefill forwards [us]
  // A staged cache (pools the model cannot compute in, engine/staged_model_kv_cache.hpp):
  // token rows moved from the pools into the host copy and back.
  uint64_t staged_rows_loaded = 0;  // [rows]
  uint64_t staged_rows_stored = 0;  // [rows]
  // Templated prompts (Prompt Cache, 0x0CB): requests admitted through the
  // node's assembly, modules reused (their rows copied from the module
  // store's blocks) or computed alone (a miss: never computed with those
  // parameters, or incompatible: other tokens, a moved module, another
  // schema generation or model), and modules published to the store.
  uint64_t prompt_requests = 0;              // [requests]
  uint64_t prompt_modules_reused = 0;        // [modules]
  uint64_t prompt_module_rows_reused = 0;    // [rows]
  uint64_t prompt_modules_computed = 0;      // [modules]
  uint64_t prompt_module_rows_computed = 0;  // [rows]
  uint64_t prompt_modules_published = 0;     // [modules]
  uint64_t prompt_misses_not_computed = 0;   // no_candidate [modules]
  uint64_t prompt_misses_incompatible = 0;   // a failed factor of H_module, or the namespace [modules]
  uint64_t prompt_copy_us = 0;               // copying reused module rows into the prompts' blocks [us]
  // Prompt calls refused because a newer schema generation was registered
  // (by another worker): the prompt computed every module (not an error).
  uint64_t prompt_stale_schema = 0;             // [calls]
  uint64_t decode_rows_computed = 0;            // [rows]
  uint64_t decode_kv_bytes_read = 0;            // K+V bytes the decode attention read [bytes]
  uint64_t forked_requests = 0;                 // branches created by ForkOp [requests]
  uint64_t copy_on_write_rows = 0;              // rows the allocator copied for divergent writes [rows]
  uint64_t shared_prefix_batches = 0;           // decode steps run with shared-prefix execution [batches]
  uint64_t shared_prefix_rows_read_once = 0;    // shared K/V token rows read once per batch [rows]
  uint64_t shared_prefix_rows_per_request = 0;  // the same rows, had each request read them [rows]
  // Shared-prefix decode on the node's executor owner: ops sent (one per
  // layer per batch), by the design the node ran, the deepest prefix tree,
  // and the batches decoded here after the node refused the op.
  uint64_t node_shared_ops = 0;               // [operations]
  uint64_t node_shared_hydragen = 0;          // [operations]
  uint64_t node_shared_chunk_attention = 0;   // [operations]
  uint64_t node_shared_per_request = 0;       // ran per request: not shareable (fallback_reason) [operations]
  uint64_t node_shared_max_levels = 0;        // most shared chunks on one sequence's path [chunks]
  uint64_t node_shared_multi_level = 0;       // ops over a tree of more than one shared level [operations]
  uint64_t node_shared_refusals = 0;          // batches decoded in the worker after a refusal [batches]
  uint64_t node_shared_rows_read = 0;         // committed K/V token rows the node's design read, per batch [rows]
  uint64_t node_shared_rows_per_request = 0;  // the same rows, had each request read its own [rows]
  // Virtual reservations (a layout with physical_mode = "virtual_pages",
  // engine/virtual_engine.hpp): mapper steps, pages mapped for this worker's
  // frontiers (each of the 2L tensors counts), inactive owners' bundles
  // reclaimed, slots bound with a retained mapping, and the 0x06F ledgers.
  uint64_t virtual_steps = 0;                       // [steps]
  uint64_t virtual_steps_infeasible = 0;            // short of page handles, retried [steps]
  uint64_t virtual_pages_mapped = 0;                // [pages]
  uint64_t virtual_bundles_reclaimed = 0;           // [bundles]
  uint64_t virtual_retained_slot_reuses = 0;        // [slots]
  uint64_t virtual_retained_pages_reused = 0;       // [pages per tensor]
  uint64_t virtual_reserved_bytes = 0;              // M_VA [bytes of address space]
  uint64_t virtual_pool_bytes = 0;                  // M_phys,pool [bytes]
  uint64_t virtual_mapped_peak_bytes = 0;           // largest M_mapped a step reported [bytes]
  uint64_t virtual_active_valid_at_peak_bytes = 0;  // M_active,valid at that step [bytes]
  uint64_t virtual_pages_mapped_ahead = 0;          // of the pages mapped, in the background ahead of use [pages]
  // With reuse: prompts whose blocks the node's pools refused at admission
  // (no room, a quota): computed in the slot, neither reused nor published [requests].
  uint64_t virtual_tier_refusals = 0;
  double view_map_ahead_us_total = 0;  // background mapping time, hidden behind forwards [us]
  double view_map_wait_us_total = 0;   // time the engine waited for it, anywhere [us]
  // Exactness.
  uint64_t requests_verified = 0;
  uint64_t token_mismatches = 0;
  uint64_t rows_checked = 0;         // cached rows compared bitwise [rows]
  uint64_t reused_rows_checked = 0;  // of which reused [rows]
  uint64_t row_mismatches = 0;
  uint64_t reused_row_mismatches = 0;
  // Decode rows computed with shared-prefix execution are compared within
  // the bound of engine/model/shared_prefix_decode.cpp, not bitwise.
  uint64_t bounded_rows_checked = 0;      // [rows]
  double bounded_row_max_difference = 0;  // largest canonical_row_difference seen
  std::string first_mismatch;
  // Served on the private path after the session was lost (no reuse, no
  // node), and why the session was lost (empty: it never was).
  uint64_t requests_served_privately = 0;
  std::string session_lost;  // the last loss
  uint64_t sessions_lost = 0, reconnects = 0;
  // Ops an armed fault point ended (fault-injection runs), which the
  // request went on without: not errors.
  uint64_t faults_absorbed = 0;
  // A live invalidation (0x01A) while the worker ran: ops refused because
  // their grant's generation was no longer current (reuse attempts, reuse
  // successors and publications, which the requests went on without), and
  // the times the worker authorized its namespaces again. Not errors.
  uint64_t stale_generation_refusals = 0;
  uint64_t reauthorizations = 0;
  // A live purge (0x0CE): authorizations and ops refused while the namespace
  // stopped admitting, and executable-reuse receipts revoked at its
  // deadline (the requests had their blocks already). Not errors.
  uint64_t namespace_closed_refusals = 0;
  uint64_t receipts_revoked = 0;
  uint64_t hits_withdrawn = 0;  // allocations refused because a revoked receipt's blocks were gone; served again
  // Weights and adapter updates: requests admitted under weights other than
  // the configured ones, and the weight variants drawn besides them.
  uint64_t requests_on_successor_weights = 0;
  uint64_t weight_variants = 0;
  // Reuse receipts naming another generation than the grant the request was
  // admitted under (the node's own claim; 0 unless the node is wrong).
  uint64_t foreign_generation_hits = 0;
  // Health.
  uint64_t out_of_capacity_retries = 0;  // allocations or appends refused for capacity, retried
  uint64_t quota_exceeded_retries = 0;   // refused for the namespace's block quota, retried
  uint64_t requests_preempted = 0;       // released while every live request waited for a block; served again
  uint64_t operation_errors = 0;
  std::string first_error;
  // Reuse funnel (0x0CF) of this worker's lookups.
  FunnelCounts funnel;
  std::array<uint64_t, kReuseBucketCount> rejections{};
  // Receipt latencies seen by this worker [us].
  std::vector<double> allocator_us, prefix_us, authorize_us, reuse_us, executor_us;
  // Virtual reservations: mapper round trips with a step (map before use)
  // and without, and this worker's own synchronous mapping of the pages a
  // step's forward needs now (waits for the background batch excluded) [us].
  std::vector<double> mapper_step_us, mapper_us, view_map_us;
  double wall_s = 0;
};

// An error before the worker admitted any request (its first binding: the
// session, grant and pools) begins its reason with this: the worker rides out
// a node lost mid-share, and a caller reading its exit can tell the two apart.
inline constexpr std::string_view kBeforeAdmission = "before admitting any request: ";

Result<EngineResult> run_engine_worker(const NodeDescriptor& node, const EngineOptions& options);

// The worker's result as JSON (`kvrt run` reads its workers' results back).
std::string engine_result_to_json(const EngineResult& result);
Result<EngineResult> engine_result_from_json(const std::string& text, const std::string& origin);

}  // namespace kvrt
