// `kvrt trace-merge --out FILE IN...`: joins the Chrome trace-event files a
// node and its workers wrote (each process writes its own) into one file, so
// Perfetto shows every process's tracks on one time axis and draws the flow
// arrows from a worker's request to the owner slice that answered it.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/kvrt/subcommand_registry.hpp"
#include "services/telemetry/trace_merge.hpp"

namespace kvrt::app {
namespace {

struct TraceMergeCli {
  std::string out = "kvrt-trace.json";
  std::vector<std::string> inputs;
};

int run_trace_merge(const TraceMergeCli& cli) {
  TraceMerge merged;
  for (const std::string& path : cli.inputs) {
    std::ifstream in(path);
    if (!in) return report_error("trace-merge", make_error(ErrorCode::io, "cannot read " + path, "input"));
    std::ostringstream text;
    text << in.rdbuf();
    if (Status added = merged.add(text.str(), path); !added.ok()) return report_error("trace-merge", added.error());
  }
  std::ofstream out(cli.out, std::ios::trunc);
  if (!out) return report_error("trace-merge", make_error(ErrorCode::io, "cannot write " + cli.out, "out"));
  out << merged.json() << "\n";
  std::cout << "kvrt trace-merge: " << merged.events() << " events from " << cli.inputs.size() << " files -> "
            << cli.out << "\n";
  return 0;
}

SubcommandRegistration trace_merge_command{
    "trace-merge", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<TraceMergeCli>();
      CLI::App* sub = parent.add_subcommand("trace-merge", "Merge the node's and workers' Chrome trace files into one");
      sub->add_option("--out", opts->out, "merged trace file")->capture_default_str();
      sub->add_option("inputs", opts->inputs, "trace files written with --trace")->required();
      return [opts] { return run_trace_merge(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
