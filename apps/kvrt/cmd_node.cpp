// `kvrt node --config config/node.toml --descriptor PATH [--trace FILE]`:
// runs the node until SIGINT/SIGTERM (actors/node_runtime.hpp).
#include <iostream>
#include <memory>

#include "actors/node_runtime.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt::app {
namespace {

struct NodeCli {
  std::string config = "config/node.toml";
  std::string descriptor = "kvrt-node.json";
  std::string trace;
  int port = -1;
};

SubcommandRegistration node_command{
    "node", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<NodeCli>();
      CLI::App* sub = parent.add_subcommand(
          "node", "Run a node: pools, owner actors, the gateway on loopback (stops on SIGINT/SIGTERM)");
      sub->add_option("--config", opts->config, "node configuration TOML")->capture_default_str();
      sub->add_option("--descriptor", opts->descriptor, "where to write the node descriptor for workers")
          ->capture_default_str();
      sub->add_option("--trace", opts->trace, "write a Chrome trace-event JSON (Perfetto) here");
      sub->add_option("--port", opts->port, "listen port (overrides [node] port; 0 = any free port)");
      return [opts] {
        NodeRunOptions o;
        o.config_path = default_config_path(opts->config);
        o.descriptor_path = opts->descriptor;
        o.trace_path = opts->trace;
        o.port_override = opts->port;
        o.on_ready = [opts] {
          std::cout << "kvrt node: serving; descriptor " << opts->descriptor << " (stop with Ctrl-C or SIGTERM)"
                    << std::endl;
          // Where an operator or a router reads the node from outside.
          if (Result<NodeDescriptor> d = read_node_descriptor(opts->descriptor); d.ok()) {
            if (!d->metrics_url.empty()) std::cout << "kvrt node: metrics at " << d->metrics_url << std::endl;
            if (!d->events_endpoint.empty())
              std::cout << "kvrt node: KV events on " << d->events_endpoint
                        << (d->events_replay_endpoint.empty() ? "" : ", replay on " + d->events_replay_endpoint)
                        << std::endl;
          }
        };
        const Status st = run_node(o);
        if (!st.ok()) return report_error("node", st.error());
        return 0;
      };
    }};

}  // namespace
}  // namespace kvrt::app
