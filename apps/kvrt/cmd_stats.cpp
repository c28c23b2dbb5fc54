// `kvrt stats --node PATH [--validate] [--json]`: every owner's gauges and
// counters read live from a running node. The counters are cheap; --validate
// also has every owner re-derive its invariants from scratch (its full
// validate(), which a debug build runs on every read). The JSON is
// node_stats_json's (engine/node_stats_json.hpp).
#include <iostream>
#include <memory>

#include "actors/client.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "engine/node_stats_json.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"

namespace kvrt::app {
namespace {

struct StatsCli {
  std::string node = "kvrt-node.json";
  bool validate = false;
  bool json = false;
};

int run_stats(const StatsCli& cli) {
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
  std::cout << "node " << node->host << ":" << node->port << " (pid " << node->node_pid << ")  validate "
            << verdict(validated, validate_ok, "") << "\n";
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
      sub->add_flag("--json", opts->json, "print one JSON object");
      return [opts] { return run_stats(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
