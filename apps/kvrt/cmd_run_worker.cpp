// `kvrt run-worker`: one worker process of `kvrt run`, started by
// the run driver, not by hand. It loads the run config (for the model), the
// workload and its share of the jobs, serves them as an engine loop through
// the node (engine/engine_worker.hpp), prints progress lines on stdout
// ("progress <requests done> <requests total> <rows computed>") and writes
// its result as JSON to --result.
#include <fstream>
#include <iostream>
#include <memory>

#include "apps/kvrt/subcommand_registry.hpp"
#include "engine/engine_worker.hpp"
#include "services/telemetry/chrome_trace.hpp"
#include "tools/run/run_config.hpp"

namespace kvrt::app {
namespace {

struct RunWorkerCli {
  std::string node, principal, config, workload, result, trace;
  std::string shared_prefix_site = "worker", shared_prefix_design = "auto";
  uint32_t index = 0, workers = 1, in_flight = 8;
  bool no_reuse = false, no_verify = false, no_shared_prefix = false, channel_only = false, session_tier = false,
       staged_pools = false;
};

int run_worker_process(const RunWorkerCli& cli) {
  Result<NodeDescriptor> node = read_node_descriptor(cli.node);
  if (!node.ok()) return report_error("run-worker", node.error());
  Result<std::string> token = read_token_file(node->token_path(cli.principal));
  if (!token.ok()) return report_error("run-worker", token.error());
  Result<RunConfig> config = load_run_config(cli.config);
  if (!config.ok()) return report_error("run-worker", config.error());
  Result<workload::Workload> workload = workload::load_workload(cli.workload);
  if (!workload.ok()) return report_error("run-worker", workload.error());

  EngineOptions options;
  options.worker_name = cli.principal;
  options.token_hex = *token;
  options.workload = &*workload;
  options.worker_index = cli.index;
  options.workers = cli.workers;
  options.one_tenant_per_worker = config->domain_pools;
  options.model = config->model;
  options.in_flight = cli.in_flight;
  options.reuse = !cli.no_reuse;
  options.session_tier = cli.session_tier;
  options.verify = !cli.no_verify;
  options.shared_prefix = !cli.no_shared_prefix;
  Result<SharedPrefixSite> site = parse_shared_prefix_site(cli.shared_prefix_site, "--shared-prefix-site");
  if (!site.ok()) return report_error("run-worker", site.error());
  options.shared_prefix_site = *site;
  Result<SharedPrefixDesign> design = parse_shared_prefix_design(cli.shared_prefix_design, "--shared-prefix-design");
  if (!design.ok()) return report_error("run-worker", design.error());
  options.shared_prefix_design = *design;
  options.channel_only = cli.channel_only;
  options.staged_pools = cli.staged_pools;
  // A lost node: the rest is served privately, and through a node that
  // starts again on the same descriptor path once one does.
  options.reconnect_descriptor = cli.node;
  options.reconnect_principal = cli.principal;
  options.on_progress = [](const EngineProgress& p) {
    std::cout << "progress " << p.requests_done << " " << p.requests_total << " " << p.rows_computed << std::endl;
  };
  std::unique_ptr<ChromeTraceRecorder> trace;
  if (!cli.trace.empty()) {
    trace = std::make_unique<ChromeTraceRecorder>(cli.trace, "kvrt " + cli.principal);
    options.trace = trace.get();
  }
  Result<EngineResult> result = run_engine_worker(*node, options);
  if (!result.ok()) return report_error("run-worker", result.error());
  if (trace) {
    if (Status s = trace->flush(); !s.ok()) return report_error("run-worker", s.error());
  }
  std::ofstream out(cli.result);
  out << engine_result_to_json(*result) << "\n";
  if (!out) return report_error("run-worker", make_error(ErrorCode::io, "cannot write " + cli.result, "result"));
  return 0;
}

SubcommandRegistration run_worker_command{
    "run-worker", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<RunWorkerCli>();
      CLI::App* sub = parent.add_subcommand("run-worker", "One worker process of `kvrt run` (started by kvrt run)");
      sub->add_option("--node", opts->node, "node descriptor")->required();
      sub->add_option("--principal", opts->principal, "this worker's principal")->required();
      sub->add_option("--config", opts->config, "run config ([run], [model])")->required();
      sub->add_option("--workload", opts->workload, "workload file")->required();
      sub->add_option("--index", opts->index, "this worker's index")->required();
      sub->add_option("--workers", opts->workers, "worker count")->required();
      sub->add_option("--in-flight", opts->in_flight, "requests batched per iteration")->capture_default_str();
      sub->add_option("--result", opts->result, "write the result JSON here")->required();
      sub->add_option("--trace", opts->trace, "write a Chrome trace-event JSON here");
      sub->add_flag("--channel-only", opts->channel_only,
                    "open each session on the node's session channel and never connect its middleman");
      sub->add_flag("--no-reuse", opts->no_reuse, "no prefix lookups or publication (baseline)");
      sub->add_flag("--session-tier", opts->session_tier,
                    "chat conversations save and resume their history through the node's session tier");
      sub->add_flag("--staged-pools", opts->staged_pools,
                    "compute over a host copy of the node's pools and move rows through their store (as GPU pools "
                    "require)");
      sub->add_flag("--no-verify", opts->no_verify, "skip the no-reuse replay of every request");
      sub->add_flag("--no-shared-prefix", opts->no_shared_prefix,
                    "decode every request on its own (no 0x0BC batching)");
      sub->add_option("--shared-prefix-site", opts->shared_prefix_site,
                      "where shared-prefix decode runs: worker or node (the executor owner)")
          ->capture_default_str();
      sub->add_option("--shared-prefix-design", opts->shared_prefix_design,
                      "the node's design: auto, hydragen, chunk_attention or per_request")
          ->capture_default_str();
      return [opts] { return run_worker_process(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
