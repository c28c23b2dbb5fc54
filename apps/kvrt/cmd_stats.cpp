// `kvrt stats --node PATH [--validate] [--json]`: every owner's gauges and
// counters read live from a running node. The counters are cheap; --validate
// also has every owner re-derive its invariants from scratch (its full
// validate(), which a debug build runs on every read). The JSON has at its
// top level validated, validate_ok, leaked_blocks, refcount_delta,
// live_leases and workers_connected, then the node's reuse funnel
// (reuse_funnel_counters.hpp), then each owner's values.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "actors/client.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"

namespace kvrt::app {
namespace {

nlohmann::ordered_json funnel_json(const NodeReuseFunnel& f) {
  nlohmann::ordered_json j;
  j["requests"] = f.requests;
  j["authorized"] = f.authorized;
  j["candidates"] = f.candidates;
  j["current_generation"] = f.current;
  j["leased"] = f.leased;
  j["out_of_capacity"] = f.out_of_capacity;
  j["quota_exceeded"] = f.quota_exceeded;
  j["unsettled"] = f.unsettled;
  nlohmann::ordered_json rejections = nlohmann::ordered_json::object();
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (f.rejections[r] > 0) rejections[std::string(to_string(static_cast<RejectionReason>(r)))] = f.rejections[r];
  j["rejections"] = rejections;
  return j;
}

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
  bool validate_ok = true, validated = true;
  for (const OwnerStats& o : stats->owners) {
    validate_ok = validate_ok && o.validate_ok;
    validated = validated && o.validated;
  }
  auto verdict = [](bool ran, bool ok, const std::string& why) -> std::string {
    if (!ran) return "not run (--validate runs it)";
    return ok ? "ok" : "FAILED" + (why.empty() ? std::string() : ": " + why);
  };
  auto top = [&](const char* owner, const char* name) { return stats->value(owner, name).value_or(-1); };
  if (cli.json) {
    nlohmann::ordered_json j;
    j["validated"] = validated;
    j["validate_ok"] = validate_ok;
    j["leaked_blocks"] = top("allocator", "leaked_blocks");
    j["refcount_delta"] = top("allocator", "refcount_delta");
    j["live_leases"] = top("allocator", "live_leases");
    j["workers_connected"] = top("node", "workers_connected");
    j["reuse_funnel"] = funnel_json(node_reuse_funnel(stats->owners));
    for (const OwnerStats& o : stats->owners) {
      nlohmann::ordered_json owner;
      owner["validated"] = o.validated;
      owner["validate_ok"] = o.validate_ok;
      if (!o.validate_error.empty()) owner["validate_error"] = o.validate_error;
      for (const StatValue& v : o.values) owner[v.name] = v.value;
      j["owners"][o.owner] = owner;
    }
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
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
