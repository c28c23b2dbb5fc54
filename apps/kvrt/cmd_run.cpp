// `kvrt run [--config F] [--workload F] [--workers N] [--out DIR] [--json]
// [--trace F] [--compare] [--shared-prefix-site worker|node]
// [--shared-prefix-design D]`: the main job. A node and N worker
// processes serve a workload end to end with the reference model computing
// real K/V into the shared-memory pools; prints the summary (or one JSON
// object with --json) and writes the report directory. Exit status: 0 when
// the run is exact, 1 when it is not, 2 for bad input.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"
#include "tools/run/run_driver.hpp"

namespace kvrt::app {
namespace {

struct RunCli {
  std::string config;
  std::string workload;
  int workers = -1;
  std::string out;
  std::string trace;
  std::string shared_prefix_site, shared_prefix_design;  // empty: the run config's
  std::string compare_physical;
  bool json = false;
  bool compare = false;
  bool quiet = false;
  bool staged_pools = false;
};

std::string default_out_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "runs/%Y%m%d-%H%M%S", &tm);
  return buffer;
}

// A progress bar on a terminal; on a pipe or file one line every few seconds.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1) {}
  void update(const RunProgress& p) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!p.finished && p.phase == phase_ &&
        now - last_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(3000)))
      return;
    last_ = now;
    phase_ = p.phase;
    const double f = p.requests_total == 0 ? 0.0 : static_cast<double>(p.requests_done) / p.requests_total;
    const int width = 30, filled = static_cast<int>(f * width);
    std::fprintf(stderr, "%s%-10s [%s%s] %5.1f%%  %llu/%llu requests  %llu rows  %.1f s%s", tty_ ? "\r" : "",
                 p.phase.c_str(), std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), 100.0 * f,
                 static_cast<unsigned long long>(p.requests_done), static_cast<unsigned long long>(p.requests_total),
                 static_cast<unsigned long long>(p.rows_computed), p.elapsed_s, tty_ ? "" : "\n");
    std::fflush(stderr);
    drawn_ = true;
    if (p.finished && tty_) {
      std::fprintf(stderr, "\n");
      drawn_ = false;
    }
  }
  void finish() {
    if (enabled_ && tty_ && drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_, tty_, drawn_ = false;
  std::string phase_;
  std::chrono::steady_clock::time_point last_{};
};

std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

int run_command(const RunCli& cli) {
  RunOptions options;
  options.config_path = cli.config.empty() ? default_config_path("config/run.toml") : cli.config;
  options.workload_path = cli.workload;
  options.workers = cli.workers;
  options.out_dir = cli.out.empty() ? default_out_dir() : cli.out;
  options.trace_path = cli.trace;
  options.compare = cli.compare;
  options.shared_prefix_site = cli.shared_prefix_site;
  options.shared_prefix_design = cli.shared_prefix_design;
  options.compare_physical_layout = cli.compare_physical;
  options.staged_pools = cli.staged_pools;
  options.worker_binary = self_executable();
  auto progress = std::make_shared<ProgressLine>(!cli.quiet);
  options.on_progress = [progress](const RunProgress& p) { progress->update(p); };
  Result<report::RunReport> report = run_workload(options);
  progress->finish();
  if (!report.ok()) return report_error("run", report.error());
  if (cli.json) {
    std::cout << report::summary_json(*report).dump() << std::endl;
  } else {
    std::cout << report::summary_text(*report) << "report: " << options.out_dir << "/report.md" << std::endl;
  }
  return report->exact ? 0 : 1;
}

SubcommandRegistration run_subcommand{
    "run", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<RunCli>();
      CLI::App* sub = parent.add_subcommand("run", "Serve a workload with a node and N worker processes, end to end");
      sub->add_option("--config", opts->config, "run config ([run], [model]); default config/run.toml");
      sub->add_option("--workload", opts->workload, "workload file (default: [run] workload)");
      sub->add_option("--workers", opts->workers, "worker processes (default: [run] workers)");
      sub->add_option("--out", opts->out, "report directory (default runs/<UTC timestamp>)");
      sub->add_option("--trace", opts->trace, "write the merged Perfetto trace of node and workers here");
      sub->add_option("--shared-prefix-site", opts->shared_prefix_site,
                      "where shared-prefix decode runs: worker or node (default: [run] shared_prefix_site)");
      sub->add_option("--shared-prefix-design", opts->shared_prefix_design,
                      "the node's shared-prefix design: auto, hydragen, chunk_attention or per_request (default: "
                      "[run] shared_prefix_design)");
      sub->add_option("--compare-physical", opts->compare_physical,
                      "also serve the workload under this layout (another physical mode: paged blocks or virtual "
                      "pages), verified, and compare");
      sub->add_flag("--staged-pools", opts->staged_pools,
                    "workers compute over a host copy of the pools and move rows through their store, as GPU pools "
                    "require (sets [run] staged_pools)");
      sub->add_flag("--compare", opts->compare, "also replay under each reuse mode and print the comparison");
      sub->add_flag("--json", opts->json, "print the summary as one JSON object");
      sub->add_flag("--quiet", opts->quiet, "no progress bar");
      return [opts] { return run_command(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
