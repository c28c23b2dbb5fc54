#pragma once
// Each `kvrt <subcommand>` lives in its own cmd_*.cpp and registers itself with
// a static SubcommandRegistration, so adding a subcommand edits no central list.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "services/common/error.hpp"

namespace kvrt::app {

// Adds the subcommand's options to `parent` and returns the run function, which
// is called after parsing when the subcommand was selected; it returns the
// process exit code.
using SubcommandSetup = std::function<std::function<int()>(CLI::App& parent)>;

struct SubcommandEntry {
  std::string name;
  SubcommandSetup setup;
};

std::vector<SubcommandEntry>& subcommand_entries();

struct SubcommandRegistration {
  SubcommandRegistration(std::string name, SubcommandSetup setup) {
    subcommand_entries().push_back({std::move(name), std::move(setup)});
  }
};

// Prints a typed error as "kvrt <cmd>: <code>: <reason> [field]" on stderr and
// returns exit code 2 (bad input), the convention every subcommand follows.
int report_error(const std::string& command, const ::kvrt::Error& error);

// Default paths, resolved against the source tree the binary was built from
// when the working directory does not have them.
std::string default_config_path(const std::string& relative);

}  // namespace kvrt::app
