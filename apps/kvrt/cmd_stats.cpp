// `kvrt stats --node PATH [--validate] [--json]`: every owner's gauges and
// counters read live from a running node. The counters are cheap; --validate
// also has every owner re-derive its invariants from scratch (its full
// validate(), which a debug build runs on every read). The JSON is
// node_stats_json's (engine/node_stats_json.hpp).
//
// `kvrt stats --watch [--interval S] [--count N] [--json]`: one line per
// interval for logs (tools/watch/node_view.hpp): pool usage, hit rate and
// refusals of the interval, sessions, events, active alerts; with --json
// one JSON object per line. Ctrl-C ends it after the line in progress.
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "actors/client.hpp"
#include "apps/kvrt/interrupt_flag.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "engine/node_stats_json.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "tools/watch/node_watcher.hpp"

namespace kvrt::app {
namespace {

struct StatsCli {
  std::string node = "kvrt-node.json";
  bool validate = false;
  bool json = false;
  bool watch = false;
  double interval_s = 1.0;
  uint64_t count = 0;  // 0: until interrupted
};

int run_watch(const StatsCli& cli) {
  if (!(cli.interval_s >= 0.05 && cli.interval_s <= 3600))
    return report_error("stats", make_error(ErrorCode::invalid_argument, "between 0.05 and 3600 seconds", "interval"));
  if (cli.validate)
    return report_error("stats", make_error(ErrorCode::invalid_argument,
                                            "--watch reads counters only; run --validate on its own", "validate"));
  Result<std::unique_ptr<watch::NodeWatcher>> watcher = watch::NodeWatcher::connect(cli.node);
  if (!watcher.ok()) return report_error("stats", watcher.error());
  const InterruptFlag interrupt;
  std::optional<watch::NodeViewSample> previous;
  int status = 0;
  for (uint64_t n = 0; cli.count == 0 || n < cli.count; ++n) {
    if (n > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(cli.interval_s);
      while (!interrupt.raised_now() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (interrupt.raised_now()) break;
    Result<watch::NodeViewSample> sample = (*watcher)->read();
    if (!sample.ok()) {
      status = report_error("stats", sample.error());
      break;
    }
    const watch::NodeView view = watch::node_view(previous ? &*previous : nullptr, *sample);
    if (cli.json)
      std::cout << watch::watch_json(view).dump() << std::endl;
    else
      std::cout << watch::watch_line(view) << std::endl;
    previous = std::move(*sample);
  }
  return status;
}

int run_stats(const StatsCli& cli) {
  if (cli.watch) return run_watch(cli);
  Result<NodeDescriptor> node = read_node_descriptor(cli.node);
  if (!node.ok()) return report_error("stats", node.error());
  Result<NodeStats> stats = read_node_stats(*node, cli.validate);
  if (!stats.ok()) return report_error("stats", stats.error());
  if (cli.json) {
    std::cout << node_stats_json(*stats).dump(2) << std::endl;
    return 0;
  }
  bool validate_ok = true, validated = true;
  for (const OwnerStats& o : stats->owners) {
    validate_ok = validate_ok && o.validate_ok;
    validated = validated && o.validated;
  }
  auto verdict = [](bool ran, bool ok, const std::string& why) -> std::string {
    if (!ran) return "not run (--validate runs it)";
    return ok ? "ok" : "FAILED" + (why.empty() ? std::string() : ": " + why);
  };
  std::cout << "node " << node->address_and_pid() << "  validate " << verdict(validated, validate_ok, "") << "\n";
  const NodeReuseFunnel f = node_reuse_funnel(stats->owners);
  std::cout << "reuse funnel (0x0CF, node view): requests " << f.requests << " -> authorized " << f.authorized
            << " -> candidates " << f.candidates << " -> current " << f.current << " -> leased " << f.leased
            << "  (out of capacity " << f.out_of_capacity << ", over quota " << f.quota_exceeded << ", unsettled "
            << f.unsettled << ")\n";
  for (const OwnerStats& o : stats->owners) {
    std::cout << "\n[" << o.owner << "] validate " << verdict(o.validated, o.validate_ok, o.validate_error) << "\n";
    for (const StatValue& v : o.values) std::cout << "  " << v.name << " = " << v.value << "\n";
  }
  return 0;
}

SubcommandRegistration stats_command{
    "stats", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<StatsCli>();
      CLI::App* sub = parent.add_subcommand("stats", "Print every owner's gauges and counters from a running node");
      sub->add_option("--node", opts->node, "node descriptor written by `kvrt node`")->capture_default_str();
      sub->add_flag("--validate", opts->validate,
                    "also run every owner's full validate() (re-derives every invariant; slower)");
      sub->add_flag("--json", opts->json, "print one JSON object (with --watch: one per line)");
      sub->add_flag("--watch", opts->watch, "print one line per interval until Ctrl-C (for logs)");
      sub->add_option("--interval", opts->interval_s, "seconds between --watch lines")->capture_default_str();
      sub->add_option("--count", opts->count, "stop --watch after this many lines (0: never)")->capture_default_str();
      return [opts] { return run_stats(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
