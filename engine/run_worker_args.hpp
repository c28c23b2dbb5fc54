#pragma once
// The command line of `kvrt run-worker` (apps/kvrt/cmd_run_worker.cpp): one
// engine process serving share `index` of `workers` of a workload through
// the node at a descriptor path, writing its result JSON when it ends.
// Built here for every caller that spawns engines (`kvrt run`, `kvrt
// chaos`), which append their own flags.
#include <cstdint>
#include <string>
#include <vector>

namespace kvrt {

struct RunWorkerArgs {
  std::string descriptor_path;
  std::string principal;
  std::string config_path;    // the run config (model, pools)
  std::string workload_path;  // the workload TOML
  uint32_t index = 0, workers = 1, in_flight = 8;
  std::string result_path;
};

inline std::vector<std::string> run_worker_args(const RunWorkerArgs& a) {
  return {"run-worker",
          "--node",
          a.descriptor_path,
          "--principal",
          a.principal,
          "--config",
          a.config_path,
          "--workload",
          a.workload_path,
          "--index",
          std::to_string(a.index),
          "--workers",
          std::to_string(a.workers),
          "--in-flight",
          std::to_string(a.in_flight),
          "--result",
          a.result_path};
}

}  // namespace kvrt
