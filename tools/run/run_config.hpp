#pragma once
// The configuration of `kvrt run` (config/run.toml): how many
// workers, which workload, the node's pools, and the reference model. The
// node's own configuration (namespaces for the workload's tenants,
// principals for the workers) is derived from it, so one file describes a
// run and the node config can never disagree with the workload.
#include <cstdint>
#include <string>

#include "engine/model/reference_model.hpp"
#include "node/node_config.hpp"
#include "services/common/result.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {

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
  uint32_t radix_budget_blocks = 0;  // blocks per group the radix may lease; 0 = the node's default (half)
  model::ModelConfig model;
};

// Reads [run] and [model]. Unknown keys in [run] are errors; every error
// names the file, line and field.
Result<RunConfig> load_run_config(const std::string& path);

// The node configuration for a run: [node] from the run config, one
// [[namespace]] per workload tenant, principals worker-0 .. worker-(n-1),
// each allowed every tenant's namespace. Paths in it are absolute.
// `prefix_index` overrides the run config's choice (the --compare passes).
std::string node_config_for_run(const RunConfig& run, const workload::Workload& workload, PrefixIndexKind prefix_index);

}  // namespace kvrt
