#pragma once
// The configuration of `kvrt run` (config/run.toml): how many
// workers, which workload, the node's pools, and the reference model. The
// node's own configuration (namespaces for the workload's tenants,
// principals for the workers) is derived from it, so one file describes a
// run and the node config can never disagree with the workload.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/reference_model.hpp"
#include "engine/shared_prefix_site.hpp"
#include "node/node_config.hpp"
#include "services/common/result.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {

// [updates]: weights updates, adapter swaps and tenant purges on the live
// node while the workers serve (0x01A, 0x0CE). Every period is [ms]; 0 = off.
struct UpdateSchedule {
  // Every period, each namespace moves to the next model generation (one
  // number for the whole node): invalidate, cause weights.
  uint32_t weights_every_ms = 0;
  // Every period, each namespace's active adapter becomes the next of
  // `adapters` in turn (at least two, distinct): invalidate, cause adapter.
  uint32_t adapter_every_ms = 0;
  std::vector<std::string> adapters;
  // Every period, the next tenant namespace in turn is purged: its
  // successor takes the next model generation (new weights for that tenant),
  // g's receipts are waited for up to purge_deadline_ms, and its blocks are
  // overwritten before their next owner.
  uint32_t purge_tenant_every_ms = 0;
  uint32_t purge_deadline_ms = 20;
  // Serve the same workload again without updates, for the throughput ratio
  // of the report (the run takes about twice as long).
  bool baseline = true;
  std::string admin_principal = "kvrt-run-operator";  // the driver's admin session

  bool enabled() const { return weights_every_ms != 0 || adapter_every_ms != 0 || purge_tenant_every_ms != 0; }
};

struct RunConfig {
  std::string config_path;            // the file read
  uint32_t workers = 4;               // worker processes [processes]
  std::string workload_path;          // absolute (relative paths resolve against the config file)
  std::string layout_path;            // absolute
  uint64_t blocks_per_group = 2048;   // pool capacity per cache group [blocks]
  uint32_t in_flight = 8;             // requests a worker batches per iteration [requests]
  bool verify = true;                 // replay every request without reuse and compare
  uint32_t sample_interval_ms = 100;  // node statistics sampling for the timeline [ms]
  uint32_t heartbeat_interval_ms = 250;
  uint32_t connection_timeout_ms = 5000;
  uint32_t node_threads = 2;                              // CAF scheduler threads of the node [threads]
  NodeScheduler node_scheduler = NodeScheduler::sharing;  // the node's [node] scheduler
  // The node's prefix-reuse owner for the main pass (`kvrt run --compare`
  // runs both either way).
  PrefixIndexKind prefix_index = PrefixIndexKind::hash_chain;
  // [run] reuse_policy: the node's prefix reuse policy (0x07D), full_block or
  // immutable_partial_tail, under either index.
  ReusePolicy reuse_policy = ReusePolicy::full_block;
  // [run] pool_segments: the node's segments "named" (in /dev/shm) or
  // "unnamed" (memfds handed to the workers' sessions by descriptor).
  PoolSegments pool_segments = PoolSegments::named;
  // [run] domain_pools: every tenant of the workload is a trust domain with
  // pools of its own on the run's node, and each worker serves one tenant
  // (worker w: tenant w mod T), mapping only that tenant's pools. Needs
  // pool_segments = "unnamed" and at least as many workers as tenants.
  bool domain_pools = false;
  // [run] pool_backend: the node's pools in shared memory ("shm", default)
  // or in GPU memory ("cuda", [node] pool_backend), which the workers
  // import through CUDA IPC and compute over through a host copy (staged).
  // Refused at the node's start on a machine without a GPU.
  PoolBackend pool_backend = PoolBackend::shm;
  // [run] staged_pools: the workers compute over a host copy of the pools
  // and move rows through the pools' store, as GPU pools require
  // (engine/staged_model_kv_cache.hpp); over shared memory it runs the same
  // moves on the CPU. Always on with pool_backend = "cuda".
  bool staged_pools = false;
  // [run] shared_prefix_site / shared_prefix_design: where the workers run
  // shared-prefix decode (engine/shared_prefix_site.hpp) and, on the node,
  // which design the executor owner runs.
  SharedPrefixSite shared_prefix_site = SharedPrefixSite::worker;
  SharedPrefixDesign shared_prefix_design = SharedPrefixDesign::auto_;
  uint32_t radix_budget_blocks = 0;
  // [run] mapper_handle_percent: with a layout of virtual pages, the node's
  // page handles as a percentage of what backs every slot to T_max (1..100,
  // default 100). Below 100, steps reclaim inactive slots' retained pages
  // and wait when even that is short (0x06E, 0x06D).
  uint32_t mapper_handle_percent = 100;
  // [run] mapper_map_ahead: the node's mapper maps the next decode step's
  // pages on a background thread (0x06D; [mapper] map_ahead). Default true.
  bool mapper_map_ahead = true;
  // [run] session_tier: the node gets a session tier ([tier] in the run
  // directory) and chat conversations go through it: a turn that ends saves
  // the history, the next turn resumes it (0x0CC). Paged pools only.
  bool session_tier = false;
  model::ModelConfig model;
  UpdateSchedule updates;
};

// Reads [run], [model] and [updates]. Unknown keys in [run] and [updates] are errors; every error
// names the file, line and field.
Result<RunConfig> load_run_config(const std::string& path);

// The node configuration for a run: [node] from the run config, one
// [[namespace]] per workload tenant, principals worker-0 .. worker-(n-1),
// each allowed every tenant's namespace, and with updates on (and
// `with_updates`) the driver's admin principal. Paths in it are absolute.
// `prefix_index` overrides the run config's choice (the --compare passes).
// `mapper`, when given, is written as the node's [mapper] table;
// `tier_directory`, when not empty, as its [tier].
std::string node_config_for_run(const RunConfig& run, const workload::Workload& workload, PrefixIndexKind prefix_index,
                                bool with_updates = false, const NodeMapperConfig* mapper = nullptr,
                                const std::string& tier_directory = "");

// The node's [mapper] for a run whose layout declares physical_mode =
// "virtual_pages" (vAttention, 0x06): one request slot per request a worker
// keeps in flight (workers x in_flight), T_max the workload's longest
// context rounded up to whole pages and whole P_a blocks (so a slot's range
// tiles into blocks, engine/virtual_model_kv_cache.hpp), G the layout's
// physical_page_bytes, and mapper_handle_percent of
// enough page handles to back every slot to T_max. Errors: config_field
// ("layout") for a layout of more than one cache group, or rows that do not
// divide a page.
Result<NodeMapperConfig> mapper_for_run(const RunConfig& run, const workload::Workload& workload,
                                        const CacheLayoutManifest& layout);

}  // namespace kvrt
