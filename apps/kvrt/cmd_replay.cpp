// `kvrt replay <index> [options] [FILE|-]`: drives one index owner from a
// JSON-lines trace and prints one JSON result line per trace line
// (docs/replay-format.md). Each index is one entry of kModes: its own
// options and a runner over (input, output); bad trace lines are answered in
// the output and never stop the run, so the exit code is 0 unless the
// command line or the input file is unusable (2).
#include <fstream>
#include <iostream>
#include <memory>

#include "apps/kvrt/subcommand_registry.hpp"
#include "tools/replay/prefix_replay.hpp"
#include "tools/replay/radix_replay.hpp"

namespace kvrt::app {
namespace {

struct ReplayCli {
  std::string file = "-";  // trace path, "-" = stdin
  std::string profile;     // compatibility profile; empty = kvrt's own defaults
  bool indices = false;    // radix: print matched slot ids
  bool no_ids = false;     // prefix: omit block_ids
};

struct ReplayMode {
  const char* name;
  const char* description;
  void (*add_options)(CLI::App& sub, ReplayCli& cli);
  // Rejects an unusable command line before any input is opened.
  Status (*check)(const ReplayCli& cli);
  // Runs the whole trace; trace errors are output lines, never a failure.
  replay::ReplaySummary (*run)(const ReplayCli& cli, std::istream& in, std::ostream& out);
};

void add_radix_options(CLI::App& sub, ReplayCli& cli) {
  sub.add_option("--profile", cli.profile, "compatibility profile: sglang (SGLang v0.5.11 RadixCache)");
  sub.add_flag("--indices", cli.indices, "print the matched slot ids (\"indices\") for match and lock");
}

Status check_radix(const ReplayCli& cli) {
  if (cli.profile.empty()) return Status::success();
  const Result<RadixReplayProfile> profile = parse_radix_replay_profile(cli.profile);
  return profile.ok() ? Status::success() : Status(profile.error());
}

replay::ReplaySummary run_radix(const ReplayCli& cli, std::istream& in, std::ostream& out) {
  RadixReplayOptions options;
  options.indices = cli.indices;
  if (!cli.profile.empty()) options.profile = parse_radix_replay_profile(cli.profile).value();  // checked
  return run_radix_replay(in, out, options);
}

void add_prefix_options(CLI::App& sub, ReplayCli& cli) {
  sub.add_option("--profile", cli.profile, "compatibility profile: vllm (vLLM v0.23.0 v1 prefix cache)");
  sub.add_flag("--no-ids", cli.no_ids, "omit block_ids from request and decode results");
}

Status check_prefix(const ReplayCli& cli) {
  if (cli.profile.empty()) return Status::success();
  const Result<PrefixReplayProfile> profile = parse_prefix_replay_profile(cli.profile);
  return profile.ok() ? Status::success() : Status(profile.error());
}

replay::ReplaySummary run_prefix(const ReplayCli& cli, std::istream& in, std::ostream& out) {
  PrefixReplayOptions options;
  options.ids = !cli.no_ids;
  if (!cli.profile.empty()) options.profile = parse_prefix_replay_profile(cli.profile).value();  // checked
  return run_prefix_replay(in, out, options);
}

constexpr ReplayMode kModes[] = {
    {"radix", "Replay a radix-index trace (RadixTree, spec 0x08)", add_radix_options, check_radix, run_radix},
    {"prefix", "Replay a prefix-index trace (PrefixIndex over the allocator, spec 0x07)", add_prefix_options,
     check_prefix, run_prefix},
};

int run_mode(const ReplayMode& mode, const ReplayCli& cli) {
  const std::string command = std::string("replay ") + mode.name;
  if (const Status ok = mode.check(cli); !ok.ok()) return report_error(command, ok.error());
  std::ifstream file;
  if (cli.file != "-") {
    file.open(cli.file);
    if (!file) return report_error(command, make_error(ErrorCode::io, "cannot open trace '" + cli.file + "'", "FILE"));
  }
  std::istream& in = cli.file == "-" ? std::cin : file;
  (void)mode.run(cli, in, std::cout);
  if (in.bad()) return report_error(command, make_error(ErrorCode::io, "read error on '" + cli.file + "'", "FILE"));
  return 0;
}

const SubcommandRegistration kRegistration{
    "replay", [](CLI::App& parent) {
      auto* replay = parent.add_subcommand("replay", "Replay a JSON-lines index trace (docs/replay-format.md)");
      replay->require_subcommand(1);
      auto cli = std::make_shared<ReplayCli>();
      auto selected = std::make_shared<const ReplayMode*>(nullptr);
      for (const ReplayMode& mode : kModes) {
        auto* sub = replay->add_subcommand(mode.name, mode.description);
        mode.add_options(*sub, *cli);
        sub->add_option("FILE", cli->file, "trace file, or - for stdin")->capture_default_str();
        sub->callback([selected, &mode] { *selected = &mode; });
      }
      return [cli, selected] { return *selected == nullptr ? 2 : run_mode(**selected, *cli); };
    }};

}  // namespace
}  // namespace kvrt::app
