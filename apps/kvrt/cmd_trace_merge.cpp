// `kvrt trace-merge --out FILE IN...`: joins the Chrome trace-event files a
// node and its workers wrote (each process writes its own) into one file, so
// Perfetto shows every process's tracks on one time axis and draws the flow
// arrows from a worker's request to the owner slice that answered it.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"

namespace kvrt::app {
namespace {

struct TraceMergeCli {
  std::string out = "kvrt-trace.json";
  std::vector<std::string> inputs;
};

int run_trace_merge(const TraceMergeCli& cli) {
  nlohmann::json merged = {{"displayTimeUnit", "ns"}, {"traceEvents", nlohmann::json::array()}};
  for (const std::string& path : cli.inputs) {
    std::ifstream in(path);
    if (!in) return report_error("trace-merge", make_error(ErrorCode::io, "cannot read " + path, "input"));
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
      return report_error("trace-merge",
                          make_error(ErrorCode::invalid_argument, path + " is not a Chrome trace-event file", "input"));
    for (auto& e : j["traceEvents"]) merged["traceEvents"].push_back(std::move(e));
  }
  std::ofstream out(cli.out, std::ios::trunc);
  if (!out) return report_error("trace-merge", make_error(ErrorCode::io, "cannot write " + cli.out, "out"));
  out << merged.dump() << "\n";
  std::cout << "kvrt trace-merge: " << merged["traceEvents"].size() << " events from " << cli.inputs.size()
            << " files -> " << cli.out << "\n";
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
