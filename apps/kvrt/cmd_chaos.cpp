// `kvrt chaos [--config config/chaos.toml] [--seed N] [--duration S]
// [--workers N] [--baseline S] [--json] [--out DIR] [--soak]`: a seeded fault campaign over a node
// and worker processes (tools/chaos/chaos_campaign.hpp). Exit status 0 when
// the campaign ended with no violation, 1 otherwise; the report lands in
// DIR/report.md and DIR/report.json, the processes' logs in DIR/logs.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/kvrt/subcommand_registry.hpp"
#include "tools/chaos/chaos_campaign.hpp"

namespace kvrt::app {
namespace {

struct ChaosCli {
  std::string config = "config/chaos.toml";
  std::optional<uint64_t> seed;
  std::optional<uint32_t> duration_s, workers, baseline_s;
  std::string out;
  bool json = false;
  bool soak = false;
};

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  return buf;
}

Result<std::string> self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return make_error(ErrorCode::io, "cannot read /proc/self/exe: " + ec.message(), "kvrt_binary");
  return p.string();
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) return make_error(ErrorCode::io, "cannot write " + path, "out");
  return Status::success();
}

int run_chaos_command(const ChaosCli& cli) {
  Result<chaos::ChaosConfig> config = chaos::load_chaos_config(default_config_path(cli.config));
  if (!config.ok()) return report_error("chaos", config.error());
  // A soak: the same node and workload without faults, 8 workers for 10
  // minutes unless told otherwise; the report's RSS slope and receipt
  // latency are its result.
  if (cli.soak) {
    config->per_minute.fill(0);
    config->workers = 8;
    config->duration_s = 600;
    // Sessions over the channel alone: the middleman's broker keeps a
    // little of every process that ever connected (docs/operations.md), which
    // would hide whether the node's own state stays flat.
    config->channel_only = true;
  }
  if (cli.seed) config->seed = *cli.seed;
  if (cli.duration_s) config->duration_s = *cli.duration_s;
  if (cli.workers) config->workers = *cli.workers;
  if (cli.baseline_s) config->baseline_s = *cli.baseline_s;
  Result<std::string> binary = self_executable();
  if (!binary.ok()) return report_error("chaos", binary.error());
  chaos::ChaosOptions o;
  o.config = *config;
  o.kvrt_binary = *binary;
  o.out_dir = cli.out.empty() ? "runs/chaos-" + utc_stamp() : cli.out;
  if (!cli.json) o.on_progress = [](const std::string& line) { std::cerr << "kvrt chaos: " << line << std::endl; };
  Result<chaos::ChaosReport> report = chaos::run_chaos_campaign(o);
  if (!report.ok()) return report_error("chaos", report.error());
  const std::string json = chaos::chaos_report_json(*report);
  if (Status s = write_text(o.out_dir + "/report.json", json + "\n"); !s.ok()) return report_error("chaos", s.error());
  if (Status s = write_text(o.out_dir + "/report.md", chaos::chaos_report_markdown(*report, o.config)); !s.ok())
    return report_error("chaos", s.error());
  if (Status s = write_text(o.out_dir + "/throughput.svg", chaos::chaos_throughput_svg(*report)); !s.ok())
    return report_error("chaos", s.error());
  if (Status s = write_text(o.out_dir + "/faults.svg", chaos::chaos_faults_svg(*report)); !s.ok())
    return report_error("chaos", s.error());
  if (cli.json)
    std::cout << json << std::endl;
  else
    std::cout << chaos::chaos_report_text(*report) << "  report: " << o.out_dir << "/report.md" << std::endl;
  return report->violations.empty() ? 0 : 1;
}

SubcommandRegistration chaos_command{
    "chaos", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<ChaosCli>();
      CLI::App* sub = parent.add_subcommand(
          "chaos",
          "Run a seeded fault campaign (worker and node kills) over a node and workers; 0 violations or exit 1");
      sub->add_option("--config", opts->config, "chaos configuration TOML ([chaos], [faults])")->capture_default_str();
      sub->add_option("--seed", opts->seed, "seed of the fault schedule and the workers (replays a campaign)");
      sub->add_option("--duration", opts->duration_s, "seconds of faults (overrides [chaos] duration_s)");
      sub->add_option("--workers", opts->workers, "worker slots (overrides [chaos] workers)");
      sub->add_option("--baseline", opts->baseline_s,
                      "then run this many seconds without faults and compare throughput (overrides [chaos] "
                      "baseline_s; 0: none)");
      sub->add_option("--out", opts->out, "directory for report.md, report.json and logs (default runs/chaos-<UTC>)");
      sub->add_flag("--json", opts->json, "print the report as JSON");
      sub->add_flag(
          "--soak", opts->soak,
          "no faults: 8 workers for 600 s (unless --workers/--duration say otherwise); reports the node's RSS "
          "slope and receipt latency");
      return [opts] { return run_chaos_command(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
