// kvrt — the single front-end binary. Subcommands register themselves
// (subcommand_registry.hpp); this file only parses and dispatches.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "apps/kvrt/subcommand_registry.hpp"
#include "services/common/error.hpp"
#include "services/common/process_heap.hpp"

namespace kvrt::app {

std::vector<SubcommandEntry>& subcommand_entries() {
  static std::vector<SubcommandEntry> entries;
  return entries;
}

int report_error(const std::string& command, const Error& error) {
  std::cerr << "kvrt " << command << ": " << error.describe() << "\n";
  return 2;
}

std::string default_config_path(const std::string& relative) {
  if (std::filesystem::exists(relative)) return relative;
  std::filesystem::path in_tree = std::filesystem::path(KVRT_SOURCE_DIR) / relative;
  if (std::filesystem::exists(in_tree)) return in_tree.string();
  return relative;
}

}  // namespace kvrt::app

int main(int argc, char** argv) {
  using namespace kvrt::app;
  // Every kvrt process serves or measures messages: keep freed heap for reuse
  // (process_heap.hpp).
  (void)kvrt::keep_heap_for_serving();
  CLI::App app{"kvrt — exact, shared K/V-cache memory for LLM serving nodes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvrt 0.1.0");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "spdlog level: trace, debug, info, warn, error, off")->capture_default_str();

  auto& entries = subcommand_entries();
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (auto& e : entries) {
    auto run = e.setup(app);
    runners.emplace_back(app.get_subcommand(e.name), std::move(run));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("[%H:%M:%S.%e] [kvrt:%P] [%^%l%$] %v");

  for (auto& [sub, run] : runners)
    if (sub != nullptr && sub->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        std::cerr << "kvrt " << sub->get_name() << ": unexpected failure: " << e.what() << "\n";
        return 1;
      }
    }
  return 1;
}
