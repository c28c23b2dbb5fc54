// `kvrt run`: the node and its worker processes. See run_driver.hpp.
#include "tools/run/run_driver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "actors/client.hpp"
#include "actors/node_runtime.hpp"
#include "engine/engine_worker.hpp"
#include "engine/run_worker_args.hpp"
#include "services/common/child_process.hpp"
#include "services/identity/layout_loader.hpp"
#include "tools/run/run_config.hpp"
#include "tools/run/run_report_builder.hpp"
#include "tools/run/update_campaign.hpp"

namespace kvrt {

namespace {

using Clock = std::chrono::steady_clock;

// SIGINT/SIGTERM during a run: the driver stops its workers and shuts the
// node down through its destructors (segments removed) instead of dying with
// the pools still in /dev/shm.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void note_interrupt(int) { g_interrupted = 1; }

struct InterruptGuard {
  struct sigaction old_int {
  }, old_term{};
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = note_interrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
  }
  ~InterruptGuard() {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
  }
};

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) return make_error(ErrorCode::io, "cannot write " + path, path);
  return Status::success();
}

std::string tail_of(const std::string& path, size_t max_bytes = 2000) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
}

// One worker process: its pid, the read end of its stdout (progress lines),
// and where its log and result go.
struct WorkerProcess {
  std::string name;
  pid_t pid = -1;
  int stdout_fd = -1;
  std::string pending;  // partial line
  std::string log_path, result_path;
  uint64_t done = 0, total = 0, rows = 0;
  bool exited = false;
  int status = 0;
};

Result<WorkerProcess> spawn_worker(const std::string& binary, const std::vector<std::string>& args,
                                   const std::string& name, const std::string& log_path,
                                   const std::string& result_path) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return make_error(ErrorCode::io, "cannot create a pipe for " + name, "pipe");
  // A worker dies with this process: killed `kvrt run` leaves no worker
  // writing into pools that are gone.
  Result<pid_t> pid = spawn_tied_child(binary, args, ChildOutput{out[1], {}, log_path, false}, SIGKILL);
  ::close(out[1]);
  if (!pid.ok()) {
    ::close(out[0]);
    return make_error(ErrorCode::run_worker_failed, pid.error().reason + " (" + name + ")", "worker_binary");
  }
  // Only our end reads without blocking; the worker's stdout stays blocking.
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  WorkerProcess w;
  w.name = name;
  w.pid = *pid;
  w.stdout_fd = out[0];
  w.log_path = log_path;
  w.result_path = result_path;
  return w;
}

// Kills and reaps every worker still running (an error path must not leave
// orphans writing into pools that are about to disappear).
struct WorkerReaper {
  std::vector<WorkerProcess>& workers;
  ~WorkerReaper() {
    for (WorkerProcess& w : workers) {
      if (!w.exited && w.pid > 0) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, nullptr, 0);
      }
      if (w.stdout_fd >= 0) ::close(w.stdout_fd);
    }
  }
};

// Progress lines: "progress <requests done> <requests total> <rows computed>".
void consume_output(WorkerProcess& w) {
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(w.stdout_fd, buffer, sizeof buffer);
    if (n <= 0) {
      if (n == 0) {
        ::close(w.stdout_fd);
        w.stdout_fd = -1;
      }
      return;
    }
    w.pending.append(buffer, static_cast<size_t>(n));
    size_t eol;
    while ((eol = w.pending.find('\n')) != std::string::npos) {
      std::istringstream line(w.pending.substr(0, eol));
      w.pending.erase(0, eol + 1);
      std::string word;
      uint64_t done = 0, total = 0, rows = 0;
      if (line >> word >> done >> total >> rows && word == "progress") {
        w.done = done;
        w.total = total;
        w.rows = rows;
      }
    }
  }
}

struct PassMode {
  std::string name;
  bool reuse = true;
  bool verify = true;
  bool shared_prefix = true;
  PrefixIndexKind index = PrefixIndexKind::hash_chain;  // the node's prefix-reuse owner
  bool updates = false;                                 // run the [updates] schedule against the node
};

Result<RunPass> run_pass(const RunOptions& options, const RunConfig& config, const workload::Workload& workload,
                         const CacheLayoutManifest& layout, const PassMode& mode, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string node_config = dir + "/node.toml";
  std::optional<NodeMapperConfig> mapper;
  if (layout.physical_mode == PhysicalMode::virtual_pages)
    KVRT_TRY_ASSIGN(mapper, mapper_for_run(config, workload, layout));
  // The session tier serves chat turns in the paged engine loop; a run over
  // virtual reservations has no engine side for it.
  const bool session_tier = config.session_tier && mode.reuse && !mapper;
  if (config.session_tier && mapper)
    return make_error(ErrorCode::config_field,
                      config.config_path + ": [run] session_tier serves paged pools; the layout declares virtual pages",
                      "session_tier");
  // Templated prompts (0x0CB) are served by the paged engine loop only.
  if (mapper && !workload.schemas.empty())
    return make_error(
        ErrorCode::config_field,
        workload.origin + ": [[templated]] prompts are served from paged pools; the layout declares virtual pages",
        "templated");
  KVRT_TRY(
      write_text(node_config, node_config_for_run(config, workload, mode.index, mode.updates,
                                                  mapper ? &*mapper : nullptr, session_tier ? dir + "/tier" : "")));
  NodeRunOptions node_options;
  node_options.config_path = node_config;
  node_options.descriptor_path = dir + "/node.json";
  if (!options.trace_path.empty()) node_options.trace_path = dir + "/node-trace.json";
  auto node_result = NodeInstance::start(node_options);
  if (!node_result.ok()) return node_result.error();
  std::unique_ptr<NodeInstance> node = std::move(node_result).value();
  auto descriptor_result = read_node_descriptor(node_options.descriptor_path);
  if (!descriptor_result.ok()) return descriptor_result.error();
  NodeDescriptor descriptor = std::move(descriptor_result).value();
  auto stats_result = NodeStatsReader::connect(descriptor);
  if (!stats_result.ok()) return stats_result.error();
  std::unique_ptr<NodeStatsReader> stats = std::move(stats_result).value();

  RunPass pass;
  pass.mode = mode.name;
  pass.index = mode.index;
  std::vector<WorkerProcess> workers;
  WorkerReaper reaper{workers};
  const Clock::time_point start = Clock::now();
  for (uint32_t w = 0; w < config.workers; ++w) {
    const std::string name = "worker-" + std::to_string(w);
    std::vector<std::string> args =
        run_worker_args(RunWorkerArgs{node_options.descriptor_path, name, config.config_path, workload.origin, w,
                                      config.workers, config.in_flight, dir + "/" + name + ".json"});
    if (!mode.reuse) args.push_back("--no-reuse");
    if (!mode.verify) args.push_back("--no-verify");
    if (!mode.shared_prefix) args.push_back("--no-shared-prefix");
    if (session_tier) args.push_back("--session-tier");
    if (config.staged_pools) args.push_back("--staged-pools");
    args.insert(args.end(), {"--shared-prefix-site", std::string(to_string(config.shared_prefix_site)),
                             "--shared-prefix-design", std::string(to_string(config.shared_prefix_design))});
    if (!options.trace_path.empty()) {
      args.push_back("--trace");
      args.push_back(dir + "/" + name + "-trace.json");
    }
    auto p_result =
        spawn_worker(options.worker_binary, args, name, dir + "/" + name + ".log", dir + "/" + name + ".json");
    if (!p_result.ok()) return p_result.error();
    WorkerProcess p = std::move(p_result).value();
    workers.push_back(std::move(p));
  }
  // Destroyed before the node: its admin session ends first.
  std::unique_ptr<UpdateCampaign> updates;
  if (mode.updates) {
    std::vector<std::string> namespaces;
    for (const workload::TenantSpec& t : workload.tenants) namespaces.push_back(t.namespace_name);
    auto started = UpdateCampaign::start(descriptor, config.updates, std::move(namespaces), layout.model_generation);
    if (!started.ok()) return started.error();
    updates = std::move(started).value();
  }

  // The workers' progress lines summed, for the caller's progress display.
  auto report_progress = [&](double elapsed_s, bool finished) {
    if (!options.on_progress) return;
    RunProgress p{0, 0, 0, elapsed_s, mode.name, finished};
    for (const WorkerProcess& w : workers) {
      p.requests_done += w.done;
      p.requests_total += w.total;
      p.rows_computed += w.rows;
    }
    options.on_progress(p);
  };

  // Follow the workers: progress lines as they come, node samples on a fixed
  // period, exits as they happen.
  Clock::time_point next_sample = Clock::now();
  const auto period = std::chrono::milliseconds(config.sample_interval_ms);
  // The longest stretch in which no worker finished a request.
  uint64_t done_before = 0;
  Clock::time_point last_done = start;
  auto note_completions = [&] {
    uint64_t done = 0;
    for (const WorkerProcess& w : workers) done += w.done;
    const Clock::time_point now = Clock::now();
    if (done != done_before) {
      pass.longest_gap_s = std::max(pass.longest_gap_s, std::chrono::duration<double>(now - last_done).count());
      done_before = done;
      last_done = now;
    }
  };
  while (std::any_of(workers.begin(), workers.end(), [](const WorkerProcess& w) { return !w.exited; })) {
    if (g_interrupted)
      return make_error(ErrorCode::run_interrupted, "interrupted: workers stopped, node shut down", mode.name);
    std::vector<pollfd> fds;
    for (const WorkerProcess& w : workers)
      if (w.stdout_fd >= 0) fds.push_back(pollfd{w.stdout_fd, POLLIN, 0});
    const int wait_ms = static_cast<int>(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(next_sample - Clock::now()).count()));
    if (!fds.empty())
      ::poll(fds.data(), fds.size(), wait_ms);
    else
      ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    for (WorkerProcess& w : workers) {
      if (w.stdout_fd >= 0) consume_output(w);
      if (!w.exited && ::waitpid(w.pid, &w.status, WNOHANG) == w.pid) w.exited = true;
    }
    if (Clock::now() >= next_sample) {
      next_sample += period;
      Result<NodeStats> s = stats->read();
      if (s.ok())
        pass.timeline.push_back(sample_from_stats(*s, layout, workload.max_context_tokens(),
                                                  std::chrono::duration<double>(Clock::now() - start).count()));
    }
    note_completions();
    report_progress(std::chrono::duration<double>(Clock::now() - start).count(), false);
  }
  pass.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (updates) pass.updates = updates->stop();
  report_progress(pass.wall_s, true);
  for (WorkerProcess& w : workers) {
    if (!WIFEXITED(w.status) || WEXITSTATUS(w.status) != 0) {
      const std::string how = WIFSIGNALED(w.status) ? "was killed by signal " + std::to_string(WTERMSIG(w.status))
                                                    : "exited with status " + std::to_string(WEXITSTATUS(w.status));
      return make_error(ErrorCode::run_worker_failed, w.name + " " + how + "; its log ends:\n" + tail_of(w.log_path),
                        w.name);
    }
    std::ifstream in(w.result_path);
    std::stringstream text;
    text << in.rdbuf();
    auto r_result = engine_result_from_json(text.str(), w.result_path);
    if (!r_result.ok()) return r_result.error();
    EngineResult r = std::move(r_result).value();
    pass.results.push_back(std::move(r));
  }

  // Every worker released everything: the node must hold no request and no
  // lease, and its reconciliation must balance (0x0CF).
  auto final_stats_result = stats->read(/*validate=*/true);
  if (!final_stats_result.ok()) return final_stats_result.error();
  NodeStats final_stats = std::move(final_stats_result).value();
  pass.final_stats = final_stats;
  pass.timeline.push_back(sample_from_stats(final_stats, layout, workload.max_context_tokens(), pass.wall_s));
  stats.reset();
  pass.pool_names.clear();
  for (const PoolAttachment& p : descriptor.pools)
    if (!p.by_descriptor) pass.pool_names.push_back(p.segment_name);  // an unnamed segment leaves no name
  node.reset();  // clean shutdown: actors stopped, segments and descriptor removed
  pass.segments_left = 0;
  for (const std::string& name : pass.pool_names)
    if (std::filesystem::exists("/dev/shm/" + (name.starts_with("/") ? name.substr(1) : name))) ++pass.segments_left;
  return pass;
}

std::string utc_timestamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, format, &tm);
  return buffer;
}

}  // namespace

// One row of --compare-physical from a pass's report.
static report::RunReport::PhysicalModeRow physical_mode_row(const report::RunReport& r,
                                                            const CacheLayoutManifest& layout) {
  report::RunReport::PhysicalModeRow row;
  row.layout_id = layout.manifest_id;
  row.physical_mode = std::string(to_string(layout.physical_mode));
  row.exact = r.exact;
  row.wall_s = r.wall_s;
  row.prefill_rows_computed = r.prefill_rows_computed;
  row.prefill_rows_reused = r.prefill_rows_reused;
  row.rows_checked = r.rows_checked;
  row.peak_unique_physical_bytes = r.peak_ledger.unique_physical_bytes;
  row.virtual_pages = r.virtual_pages;
  return row;
}

Result<report::RunReport> run_workload(const RunOptions& options) {
  const InterruptGuard interrupts;
  // Everything is loaded and checked before anything starts.
  auto config_result = load_run_config(options.config_path);
  if (!config_result.ok()) return config_result.error();
  RunConfig config = std::move(config_result).value();
  if (!options.workload_path.empty()) config.workload_path = options.workload_path;
  if (options.workers > 0) config.workers = static_cast<uint32_t>(options.workers);
  if (!options.shared_prefix_site.empty())
    KVRT_TRY_ASSIGN(config.shared_prefix_site,
                    parse_shared_prefix_site(options.shared_prefix_site, "--shared-prefix-site"));
  if (options.staged_pools) config.staged_pools = true;
  if (!options.shared_prefix_design.empty())
    KVRT_TRY_ASSIGN(config.shared_prefix_design,
                    parse_shared_prefix_design(options.shared_prefix_design, "--shared-prefix-design"));
  if (config.shared_prefix_design != SharedPrefixDesign::auto_ && config.shared_prefix_site != SharedPrefixSite::node)
    return make_error(ErrorCode::invalid_argument,
                      "shared-prefix design " + std::string(to_string(config.shared_prefix_design)) +
                          " runs on the node: needs shared-prefix site \"node\"",
                      "shared_prefix_design");
  auto workload_result = workload::load_workload(config.workload_path);
  if (!workload_result.ok()) return workload_result.error();
  workload::Workload workload = std::move(workload_result).value();
  auto layout_result = load_layout_manifest(config.layout_path);
  if (!layout_result.ok()) return layout_result.error();
  CacheLayoutManifest layout = std::move(layout_result).value();
  if (Result<model::ReferenceModel> m = model::ReferenceModel::create(config.model, layout); !m.ok()) return m.error();
  // --compare-physical's layout: loaded, and the model built on it, before anything starts.
  std::optional<CacheLayoutManifest> physical_layout;
  if (!options.compare_physical_layout.empty()) {
    KVRT_TRY_ASSIGN(physical_layout, load_layout_manifest(options.compare_physical_layout));
    if (Result<model::ReferenceModel> m = model::ReferenceModel::create(config.model, *physical_layout); !m.ok())
      return m.error();
  }
  // The staged copy is the paged engine loop's; the mapper's pages are host memory.
  for (const CacheLayoutManifest* served : {&layout, physical_layout ? &*physical_layout : nullptr})
    if (served != nullptr && served->physical_mode == PhysicalMode::virtual_pages &&
        (config.staged_pools || config.pool_backend == PoolBackend::cuda))
      return make_error(ErrorCode::config_field,
                        config.config_path +
                            ": [run] staged_pools and pool_backend = \"cuda\" serve paged pools; "
                            "layout '" +
                            served->manifest_id + "' declares virtual pages",
                        config.staged_pools ? "staged_pools" : "pool_backend");
  if (workload.vocab != config.model.vocab)
    return make_error(ErrorCode::config_field,
                      config.workload_path + ": vocab " + std::to_string(workload.vocab) +
                          " differs from [model] vocab " + std::to_string(config.model.vocab) + " of " +
                          config.config_path,
                      "workload.vocab");
  if (config.domain_pools && config.workers < workload.tenants.size())
    return make_error(ErrorCode::config_field,
                      config.config_path +
                          ": domain_pools gives each worker one tenant: " + std::to_string(workload.tenants.size()) +
                          " tenants need at least as many workers, not " + std::to_string(config.workers),
                      "workers");
  if (options.worker_binary.empty())
    return make_error(ErrorCode::invalid_argument, "no kvrt binary to start workers from", "worker_binary");
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + options.out_dir + ": " + ec.message(), "out");

  const std::string started_at = utc_timestamp("%Y-%m-%dT%H:%M:%SZ");
  const PassMode main_mode{"run", true, config.verify, true, config.prefix_index, config.updates.enabled()};
  auto main_pass_result = run_pass(options, config, workload, layout, main_mode, options.out_dir + "/node");
  if (!main_pass_result.ok()) return main_pass_result.error();
  RunPass main_pass = std::move(main_pass_result).value();
  report::RunReport report = build_run_report(main_pass, config, workload, layout);
  if (config.updates.enabled() && config.updates.baseline) {
    // The same pass without the updates: the throughput they cost.
    PassMode still = main_mode;
    still.name = "no_updates";
    still.updates = false;
    auto baseline = run_pass(options, config, workload, layout, still, options.out_dir + "/no-updates");
    if (!baseline.ok()) return baseline.error();
    report.updates = updates_summary(main_pass, &*baseline, layout);
  }
  report.started_at = started_at;
  if (!options.trace_path.empty()) {
    KVRT_TRY(merge_run_traces(options.out_dir + "/node", config.workers, options.trace_path));
    report.trace_path = options.trace_path;
  }
  if (!options.compare_physical_layout.empty()) {
    // The same workload, verified, under another layout's physical mode.
    RunConfig other = config;
    other.layout_path = std::filesystem::absolute(options.compare_physical_layout).lexically_normal().string();
    const CacheLayoutManifest& other_layout = *physical_layout;
    const PassMode mode{"physical", true, config.verify, true, config.prefix_index, false};
    RunPass other_pass;
    KVRT_TRY_ASSIGN(other_pass, run_pass(options, other, workload, other_layout, mode, options.out_dir + "/physical"));
    const report::RunReport other_report = build_run_report(other_pass, other, workload, other_layout);
    report.physical_modes = {physical_mode_row(report, layout), physical_mode_row(other_report, other_layout)};
    // The verdict covers both passes.
    report.exact = report.exact && other_report.exact;
  }
  if (options.compare) {
    // The same workload under each reuse mode, without the verification
    // replay so wall times compare serving alone.
    std::vector<RunPass> passes;
    for (const PassMode& mode : {PassMode{"no_reuse", false, false, false, PrefixIndexKind::hash_chain},
                                 PassMode{"hash_chain", true, false, false, PrefixIndexKind::hash_chain},
                                 PassMode{"hash_chain_shared_prefix", true, false, true, PrefixIndexKind::hash_chain},
                                 PassMode{"radix", true, false, false, PrefixIndexKind::radix},
                                 PassMode{"radix_shared_prefix", true, false, true, PrefixIndexKind::radix}}) {
      auto pass_result = run_pass(options, config, workload, layout, mode, options.out_dir + "/compare-" + mode.name);
      if (!pass_result.ok()) return pass_result.error();
      RunPass pass = std::move(pass_result).value();
      passes.push_back(std::move(pass));
    }
    report.comparison = comparison_rows(passes, workload);
  }
  KVRT_TRY(report::write_report(report, options.out_dir));
  return report;
}

}  // namespace kvrt
