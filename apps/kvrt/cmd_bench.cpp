// `kvrt bench <topic> [--json] [--quick]`: measured figures with a baseline
// from the same run (docs/benchmarks.md).
#include <iostream>

#include "apps/kvrt/subcommand_registry.hpp"
#include "bench/bench_topics.hpp"

namespace kvrt::app {
namespace {

struct BenchOptions {
  std::string topic;
  bool json = false;
  bool quick = false;
};

int run_bench(const BenchOptions& o) {
  for (const auto& t : bench::bench_topics())
    if (t.name == o.topic) {
      if (!o.json)
        std::cerr << "kvrt bench " << t.name << ": measuring (" << (o.quick ? "quick" : "full size") << ")...\n";
      const bench::BenchReport report = t.run(o.quick);
      std::cout << (o.json ? report.to_json() : report.to_table()) << "\n";
      return 0;
    }
  std::string names;
  for (const auto& t : bench::bench_topics()) names += (names.empty() ? "" : ", ") + t.name;
  return report_error(
      "bench", make_error(ErrorCode::invalid_argument, "unknown topic \"" + o.topic + "\"; topics: " + names, "topic"));
}

const SubcommandRegistration kRegistration{
    "bench", [](CLI::App& parent) {
      auto opts = std::make_shared<BenchOptions>();
      std::string help = "Measure a component against a baseline from the same run. Topics:";
      for (const auto& t : bench::bench_topics()) help += "\n  " + t.name + ": " + t.description;
      auto* sub = parent.add_subcommand("bench", help);
      sub->add_option("topic", opts->topic, "what to measure")->required();
      sub->add_flag("--json", opts->json, "print one JSON object (docs/benchmarks.md)");
      sub->add_flag("--quick", opts->quick, "reduced sizes, as the test suite runs it");
      return [opts] { return run_bench(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
