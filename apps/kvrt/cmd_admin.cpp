// `kvrt admin invalidate|status --node PATH [--principal NAME | --token-file F]
// ...`: an operator's calls on a live node's namespaces (0x01A). They run in
// an admin session: the principal must have role = "admin" in the node's
// [[principal]] table (a worker's token is refused, and an admin's token
// opens no namespace).
//
//   invalidate --namespace NS --cause C [--identity V]
//       makes the namespace's successor generation current; every worker
//       holding a grant of the old one is refused with
//       authorization_stale_generation on its next call and authorizes again
//   purge --namespace NS [--cause C] [--identity V] [--deadline-ms N] [--overwrite]
//       the seven steps of 0x0CE: the namespace's generation stops
//       admitting, its successor becomes current, the index drops its
//       candidates, its open reuse receipts are waited for up to the
//       deadline and then revoked, its blocks are released (and zeroed
//       before their next owner with --overwrite); prints each step
//   status [--namespace NS]
//       each namespace's generation, grants, holds and invalidations
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "actors/client.hpp"
#include "apps/kvrt/subcommand_registry.hpp"

namespace kvrt::app {
namespace {

struct AdminCli {
  std::string node = "kvrt-node.json";
  std::string principal = "admin";
  std::string token_file;
  std::string namespace_name;
  std::string cause;
  std::string identity;
  uint32_t timeout_ms = 10000;
  uint32_t deadline_ms = 1000;
  bool overwrite = false;
  bool json = false;
};

Result<std::unique_ptr<Client>> connect_admin(const AdminCli& cli) {
  Result<NodeDescriptor> node = read_node_descriptor(cli.node);
  if (!node.ok()) return node.error();
  Result<std::string> token =
      read_token_file(cli.token_file.empty() ? node->token_path(cli.principal) : cli.token_file);
  if (!token.ok()) return token.error();
  ClientOptions o;
  o.worker_name = "kvrt-admin";
  o.timeout = std::chrono::milliseconds(cli.timeout_ms);
  return Client::connect(*node, *token, o);
}

Result<InvalidationCause> parse_cause(const std::string& text) {
  for (InvalidationCause c : kInvalidationCauses)
    if (to_string(c) == text) return c;
  return make_error(
      ErrorCode::invalid_argument,
      "--cause is one of weights, adapter, transform, positions, representation, shard; not \"" + text + "\"", "cause");
}

int run_invalidate(const AdminCli& cli) {
  Result<InvalidationCause> cause = parse_cause(cli.cause);
  if (!cause.ok()) return report_error("admin invalidate", cause.error());
  Result<std::unique_ptr<Client>> client = connect_admin(cli);
  if (!client.ok()) return report_error("admin invalidate", client.error());
  Result<NamespaceInvalidationReceipt> r =
      (*client)->call(NamespaceInvalidateRequest{{}, cli.namespace_name, *cause, cli.identity});
  if (!r.ok()) return report_error("admin invalidate", r.error());
  if (cli.json) {
    nlohmann::ordered_json j;
    j["namespace"] = r->namespace_name;
    j["cause"] = to_string(r->cause);
    j["old_generation"] = r->old_generation.value;
    j["new_generation"] = r->new_generation.value;
    j["old_model_generation"] = r->old_model_generation;
    j["new_model_generation"] = r->new_model_generation;
    j["changed_facts"] = r->changed_facts;
    j["ended_grants"] = r->ended_grants;
    j["old_live_admissions"] = r->old_live_admissions;
    j["old_reclaimed"] = r->old_reclaimed;
    j["old_namespace_sha256"] = r->old_namespace_sha256.hex();
    j["new_namespace_sha256"] = r->new_namespace_sha256.hex();
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << "namespace " << r->namespace_name << " invalidated (" << to_string(r->cause) << "): generation "
            << r->old_generation.value << " -> " << r->new_generation.value << ", model generation "
            << r->old_model_generation << " -> " << r->new_model_generation << "\n  changed:";
  for (const std::string& f : r->changed_facts) std::cout << " " << f;
  std::cout << "\n  " << r->ended_grants << " grant(s) of generation " << r->old_generation.value << " ended; "
            << r->old_live_admissions << " hold(s) still on it"
            << (r->old_reclaimed ? " (reclaimable now)" : " (reclaimable when they end)") << "\n";
  return 0;
}

int run_purge(AdminCli cli) {
  Result<InvalidationCause> cause = parse_cause(cli.cause);
  if (!cause.ok()) return report_error("admin purge", cause.error());
  // The node answers when the purge completed: after the deadline at most,
  // plus the owners' answers.
  cli.timeout_ms = std::max(cli.timeout_ms, cli.deadline_ms + 10000);
  Result<std::unique_ptr<Client>> client = connect_admin(cli);
  if (!client.ok()) return report_error("admin purge", client.error());
  Result<NamespacePurgeReceipt> r = (*client)->call(
      NamespacePurgeRequest{{}, cli.namespace_name, *cause, cli.identity, cli.deadline_ms, cli.overwrite});
  if (!r.ok()) return report_error("admin purge", r.error());
  if (cli.json) {
    nlohmann::ordered_json j;
    j["namespace"] = r->namespace_name;
    j["purge"] = r->purge_id;
    j["cause"] = to_string(r->cause);
    j["purged_generation"] = r->purged_generation.value;
    j["successor_generation"] = r->successor_generation.value;
    j["ended_grants"] = r->ended_grants;
    j["dropped_index_pages"] = r->dropped_index_pages;
    j["receipts_drained"] = r->receipts_drained;
    j["receipts_revoked"] = r->receipts_revoked;
    j["blocks_marked_for_overwrite"] = r->blocks_marked_for_overwrite;
    j["external_copies"] = r->external_copies;
    j["duration_us"] = r->duration_us;
    j["resumed_after"] = r->resumed_after;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const PurgeStepRecord& s : r->steps)
      steps.push_back({{"step", s.step},
                       {"at_us", s.at_us},
                       {"work_items", s.work_items},
                       {"live_receipts", s.live_receipts},
                       {"count", s.count},
                       {"detail", s.detail}});
    j["steps"] = steps;
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << "namespace " << r->namespace_name << " purged (purge " << r->purge_id << ", " << to_string(r->cause)
            << "): generation " << r->purged_generation.value << " -> " << r->successor_generation.value << " in "
            << r->duration_us << " us";
  if (!r->resumed_after.empty()) std::cout << " (resumed after " << r->resumed_after << ")";
  std::cout << "\n";
  for (const PurgeStepRecord& s : r->steps)
    std::cout << "  " << s.step << " at " << s.at_us << " us: " << s.count << " " << s.detail << "\n";
  return 0;
}

int run_status(const AdminCli& cli) {
  Result<std::unique_ptr<Client>> client = connect_admin(cli);
  if (!client.ok()) return report_error("admin status", client.error());
  Result<NamespaceStatusReceipt> r = (*client)->call(NamespaceStatusRequest{{}, cli.namespace_name});
  if (!r.ok()) return report_error("admin status", r.error());
  if (cli.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const NamespaceStatus& s : r->namespaces) {
      nlohmann::ordered_json n;
      n["namespace"] = s.namespace_name;
      n["generation"] = s.generation.value;
      n["model_generation"] = s.model_generation;
      n["admitting"] = s.admitting;
      n["open_purge"] = s.open_purge;
      n["live_grants"] = s.live_grants;
      n["frozen_generations"] = s.frozen_generations;
      n["live_lease_holds"] = s.live_lease_holds;
      n["live_receipt_holds"] = s.live_receipt_holds;
      n["invalidations"] = s.invalidations;
      n["last_cause"] = s.last_cause;
      j.push_back(n);
    }
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  for (const NamespaceStatus& s : r->namespaces) {
    std::cout << s.namespace_name << ": generation " << s.generation.value << " (model generation "
              << s.model_generation << "), " << (s.admitting ? "admitting" : "not admitting") << ", " << s.live_grants
              << " grant(s), " << s.invalidations << " invalidation(s)";
    if (!s.last_cause.empty()) std::cout << ", last " << s.last_cause;
    if (s.open_purge != 0) std::cout << ", purge " << s.open_purge << " open";
    if (!s.frozen_generations.empty()) {
      std::cout << "; still held:";
      for (uint64_t g : s.frozen_generations) std::cout << " " << g;
    }
    std::cout << "\n";
  }
  return 0;
}

void add_connection_options(CLI::App* sub, AdminCli& cli) {
  sub->add_option("--node", cli.node, "node descriptor written by `kvrt node`")->capture_default_str();
  sub->add_option("--principal", cli.principal, "admin principal whose token file the node wrote")
      ->capture_default_str();
  sub->add_option("--token-file", cli.token_file, "read the admin token from this file instead");
  sub->add_option("--timeout-ms", cli.timeout_ms, "how long to wait for the node's answer")->capture_default_str();
  sub->add_flag("--json", cli.json, "print JSON");
}

SubcommandRegistration admin_command{
    "admin", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<AdminCli>();
      CLI::App* admin = parent.add_subcommand("admin", "An operator's calls on a live node's namespaces");
      admin->require_subcommand(1);
      CLI::App* inv = admin->add_subcommand(
          "invalidate", "Make a namespace's successor generation current (weights, adapter, ... changed)");
      add_connection_options(inv, *opts);
      inv->add_option("--namespace", opts->namespace_name, "the namespace, deployment/tenant")->required();
      inv->add_option("--cause", opts->cause, "weights, adapter, transform, positions, representation or shard")
          ->required();
      inv->add_option("--identity", opts->identity,
                      "the cause's new fact: adapter or transform identity, position contract digest (64 hex); "
                      "weights: a model generation (default: current + 1)");
      CLI::App* status = admin->add_subcommand("status", "Each namespace's generation, grants and holds");
      add_connection_options(status, *opts);
      status->add_option("--namespace", opts->namespace_name, "one namespace (default: every one)");
      CLI::App* purge =
          admin->add_subcommand("purge", "Purge a namespace's generation while requests run (0x0CE's seven steps)");
      add_connection_options(purge, *opts);
      purge->add_option("--namespace", opts->namespace_name, "the namespace, deployment/tenant")->required();
      purge->add_option("--cause", opts->cause, "what the successor changes (as for invalidate)")
          ->default_val("weights")
          ->capture_default_str();
      purge->add_option("--identity", opts->identity, "the cause's new fact (as for invalidate)");
      purge
          ->add_option("--deadline-ms", opts->deadline_ms,
                       "how long open reuse receipts of the generation may run before they are revoked")
          ->capture_default_str();
      purge->add_flag("--overwrite", opts->overwrite, "zero every block before its next owner is handed it");
      return [opts, inv, purge] {
        if (inv->parsed()) return run_invalidate(*opts);
        if (purge->parsed()) return run_purge(*opts);
        return run_status(*opts);
      };
    }};

}  // namespace
}  // namespace kvrt::app
