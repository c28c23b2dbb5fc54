// `kvrt worker --node PATH [--principal NAME | --token-file F] [--workload
// options] [--duration S] [--seed N] [--json]`: one worker process running a
// random shared-prefix workload against a node (engine/worker_runtime.hpp).
// Exit status 0 only when every request was served exactly and without error.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"
#include "engine/worker_runtime.hpp"
#include "services/telemetry/chrome_trace.hpp"

namespace kvrt::app {
namespace {

struct WorkerCli {
  std::string node = "kvrt-node.json";
  std::string principal = "worker-0";
  std::string token_file;
  std::string trace;
  bool json = false;
  WorkerOptions workload;
};

int run_worker_command(WorkerCli& cli) {
  Result<NodeDescriptor> node = read_node_descriptor(cli.node);
  if (!node.ok()) return report_error("worker", node.error());
  Result<std::string> token =
      read_token_file(cli.token_file.empty() ? node->token_path(cli.principal) : cli.token_file);
  if (!token.ok()) return report_error("worker", token.error());
  cli.workload.token_hex = *token;
  if (cli.workload.worker_name == "worker") cli.workload.worker_name = cli.principal;
  std::unique_ptr<ChromeTraceRecorder> trace;
  if (!cli.trace.empty()) {
    trace = std::make_unique<ChromeTraceRecorder>(cli.trace, "kvrt worker " + cli.workload.worker_name);
    cli.workload.trace = trace.get();
  }
  // The node's log names sessions by id: this line ties them to this process.
  cli.workload.on_session = [&cli](const SessionReceipt& session) {
    std::cerr << "kvrt worker " << cli.workload.worker_name << ": session " << session.session.value << " (pid "
              << ::getpid() << ")" << std::endl;
  };
  Result<WorkerSummary> s = run_worker(*node, cli.workload);
  if (!s.ok()) return report_error("worker", s.error());
  if (cli.json) {
    nlohmann::ordered_json j{{"worker", cli.workload.worker_name},
                             {"requests", s->requests},
                             {"prompt_tokens", s->prompt_tokens},
                             {"hit_tokens", s->hit_tokens},
                             {"rows_written", s->rows_written},
                             {"reused_rows_checked", s->reused_rows_checked},
                             {"reuse_mismatches", s->reuse_mismatches},
                             {"out_of_capacity", s->out_of_capacity},
                             {"quota_exceeded", s->quota_exceeded},
                             {"operation_errors", s->operation_errors},
                             {"faults_absorbed", s->faults_absorbed},
                             {"stale_generation_refusals", s->stale_generation_refusals},
                             {"reauthorizations", s->reauthorizations},
                             {"receipts_revoked", s->receipts_revoked},
                             {"hits_withdrawn", s->hits_withdrawn},
                             {"round_trips", s->round_trips},
                             {"call_p50_us", s->call_us.p50_us},
                             {"call_p99_us", s->call_us.p99_us},
                             {"call_max_us", s->call_us.max_us},
                             {"successors_published", s->successors_published},
                             {"physical_mode", s->physical_mode},
                             {"mapper_steps", s->mapper_steps},
                             {"mapper_steps_short", s->mapper_steps_short},
                             {"pages_mapped", s->pages_mapped},
                             {"retained_slot_reuses", s->retained_slot_reuses},
                             {"slots_unavailable", s->slots_unavailable},
                             {"slot_rows_checked", s->slot_rows_checked},
                             {"slot_row_mismatches", s->slot_row_mismatches},
                             {"wall_s", s->wall_s},
                             {"first_error", s->first_error},
                             {"stopped_by", s->stopped_by ? s->stopped_by->describe() : ""}};
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << cli.workload.worker_name << ": " << s->requests << " requests, " << s->hit_tokens << "/"
              << s->prompt_tokens << " prompt tokens reused, " << s->reused_rows_checked << " reused rows checked, "
              << s->reuse_mismatches << " mismatches, " << s->successors_published << " successors published, "
              << s->operation_errors << " errors, " << s->round_trips << " round trips in " << s->wall_s << " s"
              << std::endl;
    if (s->physical_mode == "virtual_pages")
      std::cout << "  virtual reservations: " << s->mapper_steps << " mapper steps (" << s->mapper_steps_short
                << " short of page handles), " << s->pages_mapped << " pages mapped, " << s->retained_slot_reuses
                << " slots bound with retained pages, " << s->slots_unavailable << " requests found no slot, "
                << s->slot_rows_checked << " slot rows checked, " << s->slot_row_mismatches << " mismatches"
                << std::endl;
    if (s->out_of_capacity + s->quota_exceeded > 0)
      std::cout << "  dropped: " << s->out_of_capacity << " refused for capacity, " << s->quota_exceeded
                << " for the namespace's block quota" << std::endl;
    if (!s->first_error.empty()) std::cout << "  first error: " << s->first_error << std::endl;
  }
  // Non-zero when the worker could not do what it was asked: its session was
  // lost (the node died), an operation failed, or a reused row (or, over
  // virtual reservations, a slot row) was not exact.
  if (s->stopped_by) std::cerr << "kvrt worker: stopped: " << s->stopped_by->describe() << std::endl;
  return s->stopped_by || s->operation_errors > 0 || s->reuse_mismatches > 0 || s->slot_row_mismatches > 0 ? 1 : 0;
}

SubcommandRegistration worker_command{
    "worker", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<WorkerCli>();
      CLI::App* sub = parent.add_subcommand("worker", "Run one worker process against a node (shared-prefix workload)");
      sub->add_option("--node", opts->node, "node descriptor written by `kvrt node`")->capture_default_str();
      sub->add_option("--principal", opts->principal, "principal whose token file the node wrote")
          ->capture_default_str();
      sub->add_option("--token-file", opts->token_file, "read the token from this file instead");
      sub->add_option("--namespace", opts->workload.namespace_name, "cache namespace (default: the first allowed)");
      sub->add_option("--duration", opts->workload.duration_s, "seconds to keep starting requests")
          ->capture_default_str();
      sub->add_option("--requests", opts->workload.max_requests, "stop after this many requests (0: no limit)");
      sub->add_option("--seed", opts->workload.seed, "this worker's random choices")->capture_default_str();
      sub->add_option("--workload-seed", opts->workload.workload_seed, "shared system prompts")->capture_default_str();
      sub->add_option("--in-flight", opts->workload.in_flight, "requests batched per iteration")->capture_default_str();
      sub->add_option("--decode-tokens", opts->workload.decode_tokens, "tokens decoded per request")
          ->capture_default_str();
      sub->add_option("--trace", opts->trace, "write a Chrome trace-event JSON here");
      sub->add_option("--call-timeout-ms", opts->workload.call_timeout_ms,
                      "a call with no reply by then fails with rpc_timeout [ms]")
          ->capture_default_str()
          ->check(CLI::Range(1u, 3600000u));
      sub->add_option("--channel-socket", opts->workload.channel_socket,
                      "connect the session channel here instead of the node's socket (a proxy; fault-injection runs)");
      sub->add_flag("--channel-only", opts->workload.channel_only,
                    "open the session on the node's session channel and never connect its middleman (the node keeps "
                    "nothing of this process once the session ends)");
      sub->add_flag("--json", opts->json, "print the summary as one JSON object");
      return [opts] { return run_worker_command(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
