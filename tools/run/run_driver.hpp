#pragma once
// `kvrt run`: a node and N worker processes on one machine serving
// a workload end to end through every owner, and the report of it.
//
// The driver (this process) loads and checks everything first (run config,
// workload, layout, model: a bad file starts nothing), writes the node
// configuration for the workload's tenants into the run directory, starts the
// node in-process (actors/node_runtime.hpp), spawns the workers as separate
// processes (`kvrt run-worker`, each an engine loop over kvrt::Client, see
// engine_worker.hpp), follows their progress through pipes while sampling the
// node's statistics for the utilisation timeline, and after the workers exit
// reads their results, checks the node holds nothing (no live request, no
// lease, no leaked block, refcounts reconciled), shuts the node down and
// builds the RunReport. CAF-free interface.
#include <cstdint>
#include <functional>
#include <string>

#include "services/common/result.hpp"
#include "tools/report/run_report.hpp"

namespace kvrt {

struct RunProgress {
  uint64_t requests_done = 0;
  uint64_t requests_total = 0;
  uint64_t rows_computed = 0;  // model rows, every worker [rows]
  double elapsed_s = 0;
  std::string phase;      // "run", "no_reuse", "hash_chain"
  bool finished = false;  // the pass's last report: every worker exited
};

struct RunOptions {
  std::string config_path;    // config/run.toml
  std::string workload_path;  // overrides [run] workload when not empty
  int workers = -1;           // overrides [run] workers when > 0
  std::string out_dir;        // report directory (created)
  std::string trace_path;     // Perfetto trace of node and workers; empty: off
  bool compare = false;       // replay under every reuse mode too
  // Override [run] shared_prefix_site / shared_prefix_design when not empty
  // (the config's words; a bad word is the loader's typed error).
  std::string shared_prefix_site, shared_prefix_design;
  bool staged_pools = false;  // sets [run] staged_pools
  // Serve the workload a second time under this layout (another physical
  // mode: paged blocks or virtual pages) and compare; empty: no second pass.
  std::string compare_physical_layout;
  std::string worker_binary;  // the kvrt executable that serves `run-worker`
  std::function<void(const RunProgress&)> on_progress;
};

// Runs the workload and returns the report (also written to out_dir).
// Errors: the loaders' typed errors (nothing started), node start-up errors,
// run_worker_failed naming the worker and the tail of its log.
Result<report::RunReport> run_workload(const RunOptions& options);

}  // namespace kvrt
