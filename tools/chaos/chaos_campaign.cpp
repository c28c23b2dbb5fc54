#include "tools/chaos/chaos_campaign.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "actors/client.hpp"
#include "engine/engine_worker.hpp"
#include "services/common/child_process.hpp"
#include "services/common/splitmix64.hpp"
#include "services/session/node_descriptor.hpp"
#include "tools/chaos/chaos_admin_session.hpp"
#include "tools/chaos/chaos_worker_results.hpp"
#include "tools/chaos/hostile_client.hpp"
#include "tools/report/run_report.hpp"

namespace kvrt::chaos {

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

LatencySummary summarize(const std::vector<double>& ms) {
  return LatencySummary{ms.size(), report::percentile(ms, 50), report::percentile(ms, 99), report::percentile(ms, 100)};
}

// A child process of the campaign: spawned tied to this thread (it dies
// with the campaign), reaped by poll().
struct Child {
  pid_t pid = -1;
  std::string log;
  std::optional<int> status;  // exit code, or 128 + signal

  bool running() const { return pid > 0 && !status; }
  // Reaps without blocking; true once it has exited.
  bool poll() {
    if (pid <= 0 || status) return true;
    int s = 0;
    if (::waitpid(pid, &s, WNOHANG) != pid) return false;
    status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
    return true;
  }
  void kill_and_reap() {
    if (!running()) return;
    ::kill(pid, SIGKILL);
    int s = 0;
    ::waitpid(pid, &s, 0);
    status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  }
};

struct WorkerSlot {
  Child process;
  uint32_t started = 0;                         // processes this slot has run
  std::optional<FaultKind> fault;               // the fault the current process received
  std::optional<Clock::time_point> resume_at;   // worker_sigstop: SIGCONT then
  std::optional<Clock::time_point> hung_until;  // worker_hang: SIGKILL then
  // worker_hang: when it was stopped, and its session (from the line `kvrt
  // worker` prints), until the node's log says it reclaimed that session.
  Clock::time_point hung_at{};
  std::optional<uint64_t> hung_session;
  std::string result_path;  // an engine slot's result JSON (kvrt run-worker --result)
};

class Campaign {
 public:
  explicit Campaign(const ChaosOptions& o) : o_(o), c_(o.config) {
    report_.seed = c_.seed;
    report_.workers = c_.workers;
    slots_.resize(c_.workers);
  }

  Result<ChaosReport> run() {
    std::error_code ec;
    std::filesystem::create_directories(o_.out_dir + "/logs", ec);
    if (ec) return make_error(ErrorCode::io, "cannot create " + o_.out_dir + "/logs: " + ec.message(), "out");
    descriptor_path_ = o_.out_dir + "/node.json";
    const std::vector<FaultEvent> schedule = make_fault_schedule(c_, c_.seed);
    for (const FaultEvent& e : schedule) ++report_.scheduled[static_cast<size_t>(e.kind)];
    start_ = Clock::now();
    KVRT_TRY(start_proxy());
    KVRT_TRY(start_node());
    for (uint32_t s = 0; s < c_.workers; ++s) spawn_worker(s);
    size_t next = 0;
    const auto end = start_ + std::chrono::seconds(c_.duration_s);
    auto next_validation = Clock::now() + std::chrono::milliseconds(c_.validate_every_ms);
    auto next_progress = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < end) {
      while (next < schedule.size() && elapsed_ms() >= schedule[next].at_ms) KVRT_TRY(inject(schedule[next++]));
      tend_workers(/*respawn=*/true);
      collect_hostile(/*wait=*/false);
      if (Clock::now() >= next_validation) {
        validate_node();
        next_validation = Clock::now() + std::chrono::milliseconds(c_.validate_every_ms);
      }
      if (o_.on_progress && Clock::now() >= next_progress) {
        o_.on_progress(progress_line());
        next_progress = Clock::now() + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    finish();
    if (proxy_) {
      report_.transport_applied = proxy_->stats().applied;
      proxy_.reset();  // removes its socket
    }
    report_.wall_s = std::chrono::duration<double>(Clock::now() - start_).count();
    report_.node_death_detection = summarize(detection_ms_);
    summarize_rss();
    if (!worker_p99_us_.empty()) {
      std::sort(worker_p99_us_.begin(), worker_p99_us_.end());
      report_.worker_call_p99_median_us = worker_p99_us_[worker_p99_us_.size() / 2];
      report_.worker_call_p99_max_us = worker_p99_us_.back();
    }
    report_.node_restart = summarize(restart_ms_);
    report_.hung_worker_reclaim = summarize(hung_reclaim_ms_);
    return report_;
  }

 private:
  uint64_t elapsed_ms() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count());
  }

  void violation(const std::string& what) {
    report_.violations.push_back(Violation{elapsed_ms(), what, last_fault_});
    if (o_.on_progress) o_.on_progress("VIOLATION at " + std::to_string(elapsed_ms()) + " ms: " + what);
  }

  std::string progress_line() const {
    uint64_t injected = 0;
    for (uint64_t n : report_.injected) injected += n;
    return std::to_string(elapsed_ms() / 1000) + " s: " + std::to_string(injected) + " faults, " +
           std::to_string(report_.node_restarts) + " node restarts, " + std::to_string(report_.requests) +
           " requests, " + std::to_string(report_.violations.size()) + " violations";
  }

  Result<pid_t> spawn(const std::vector<std::string>& args, const std::string& log) {
    return spawn_tied_child(o_.kvrt_binary, args, ChildOutput{-1, log, {}, true}, SIGKILL);
  }

  // A node on the campaign's descriptor path, serving once the descriptor
  // names it (a killed predecessor's descriptor stays until it replaces it).
  Status start_node() {
    const bool alternate = !c_.alternate_node_config_path.empty() && node_starts_ % 2 == 1;
    const std::string& config = alternate ? c_.alternate_node_config_path : c_.node_config_path;
    const std::string log = o_.out_dir + "/logs/node-" + std::to_string(node_starts_++) + ".log";
    Result<pid_t> pid = spawn({"node", "--config", config, "--descriptor", descriptor_path_}, log);
    if (!pid.ok()) return pid.error();
    node_ = Child{*pid, log, std::nullopt};
    node_log_offset_ = 0;  // a new node numbers its sessions from 1 again
    lost_seen_.clear();
    const auto deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms) + std::chrono::seconds(30);
    while (true) {
      Result<NodeDescriptor> d = read_node_descriptor(descriptor_path_);
      if (d.ok() && d->node_pid == static_cast<uint32_t>(*pid)) {
        descriptor_ = std::move(*d);
        for (const PoolAttachment& p : descriptor_.pools)
          if (!p.by_descriptor) segments_seen_.insert(p.segment_name);  // an unnamed segment has no name to outlive
        return connect_admin();
      }
      if (node_.poll())
        return make_error(ErrorCode::run_worker_failed,
                          "the node exited with status " + std::to_string(*node_.status) + " before serving:\n" +
                              tail_of(read_file(log)),
                          "node");
      if (Clock::now() > deadline)
        return make_error(ErrorCode::run_stalled, "the node did not serve its descriptor in time", "node");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // transport faults: every worker's session channel goes through a proxy
  // that forwards to the node's channel socket (the same path for every
  // node the campaign starts: the descriptor's token directory).
  Status start_proxy() {
    if (c_.per_minute[static_cast<size_t>(FaultKind::transport)] == 0 && !c_.channel_proxy) return Status::success();
    static std::atomic<uint32_t> proxies{0};
    const std::string path =
        "/tmp/kvrt-chaos-" + std::to_string(::getpid()) + "-" + std::to_string(proxies++) + ".sock";
    Result<std::unique_ptr<ChannelFaultProxy>> p =
        ChannelFaultProxy::start(path, descriptor_path_ + ".tokens/session.sock");
    if (!p.ok()) return p.error();
    proxy_ = std::move(*p);
    return Status::success();
  }

  // One frame of the slot's worker, chosen from the event: the kind by a
  // hash of its moment, so the same seed does the same thing.
  void arm_transport(const FaultEvent& e, int pid) {
    const auto kind =
        static_cast<TransportFaultKind>(splitmix64(e.at_ms ^ (uint64_t(e.slot) << 40)) % kTransportFaultKindCount);
    proxy_->arm(pid, TransportFault{kind, c_.transport_delay_ms});
  }

  // The admin session (only when the campaign arms fault points or updates
  // namespaces): the node's admin routes refuse worker sessions.
  Status connect_admin() {
    admin_.reset();
    Result<std::optional<ChaosAdminSession>> admin = ChaosAdminSession::connect(c_, descriptor_);
    if (!admin.ok()) return admin.error();
    admin_ = std::move(*admin);
    // Every point some node of the campaign registered is reported, fired or not.
    if (admin_)
      for (const std::string& name : admin_->registered()) report_.fault_points_armed.try_emplace(name, 0);
    return Status::success();
  }

  // Adds what fired on this node to the campaign's totals (before the node
  // goes: its counters go with it).
  void collect_fired() {
    if (!admin_) return;
    Result<std::vector<FaultPointFired>> fired = admin_->fired();
    if (!fired.ok()) {
      violation("the node's fault points could not be read: " + fired.error().describe());
      return;
    }
    for (const FaultPointFired& f : *fired) report_.fault_points_fired[f.name] += f.fired;
  }

  // A weights invalidation or a purge of one of the node's namespaces.
  // Refusals that the node's own state explains are counted, not
  // violations (ChaosAdminSession::update_namespace).
  void update_namespace(const FaultEvent& e) {
    if (!admin_) return;
    Result<std::optional<ChaosAdminSession::NamespaceUpdate>> u = admin_->update_namespace(e);
    if (!u.ok()) {
      violation(u.error().reason);
      return;
    }
    if (!*u) return;  // the node has no namespace
    if ((*u)->refused) {
      ++report_.namespace_updates_refused;
    } else if ((*u)->purge) {
      ++report_.namespace_purges;
      if ((*u)->resumed) ++report_.namespace_purges_resumed;
    } else {
      ++report_.namespace_invalidations;
    }
  }

  void arm_fault_point(const FaultEvent& e) {
    if (!admin_) return;
    Result<std::optional<std::string>> armed = admin_->arm(e);
    if (!armed.ok()) {
      violation("arming fault point " + admin_->registered()[e.slot % admin_->registered().size()] +
                " failed: " + armed.error().describe());
      return;
    }
    if (*armed) ++report_.fault_points_armed[**armed];
  }

  // A fresh process for the slot: `kvrt worker`, or an engine slot's
  // `kvrt run-worker`.
  void spawn_worker(uint32_t s) {
    WorkerSlot& slot = slots_[s];
    const std::string log =
        o_.out_dir + "/logs/worker-" + std::to_string(s) + "-" + std::to_string(slot.started) + ".log";
    const std::vector<std::string> args = is_engine(s) ? engine_args(s, log) : worker_args(s);
    Result<pid_t> pid = spawn(args, log);
    ++slot.started;
    slot.fault.reset();
    slot.resume_at.reset();
    slot.hung_until.reset();
    if (!pid.ok()) {
      violation("worker slot " + std::to_string(s) + " could not start: " + pid.error().describe());
      slot.process = Child{};
      return;
    }
    slot.process = Child{*pid, log, std::nullopt};
    ++report_.workers_started;
  }

  std::vector<std::string> worker_args(uint32_t s) const {
    const uint64_t seed = splitmix64(c_.seed ^ (uint64_t(s) << 32) ^ slots_[s].started);
    std::vector<std::string> args{"worker",
                                  "--node",
                                  descriptor_path_,
                                  "--principal",
                                  "worker-" + std::to_string(s),
                                  "--duration",
                                  std::to_string(c_.worker_duration_s),
                                  "--seed",
                                  std::to_string(seed),
                                  "--json"};
    if (proxy_)
      args.insert(args.end(),
                  {"--channel-socket", proxy_->path(), "--call-timeout-ms", std::to_string(c_.worker_call_timeout_ms)});
    if (c_.channel_only) args.push_back("--channel-only");
    return args;
  }

  bool is_engine(uint32_t s) const { return s < c_.engine_slots; }

  // An engine slot: `kvrt run-worker` over its share of the engine workload,
  // reconnecting to the campaign's descriptor path when its node dies; its
  // result JSON beside its log.
  std::vector<std::string> engine_args(uint32_t s, const std::string& log) {
    WorkerSlot& slot = slots_[s];
    slot.result_path = log.substr(0, log.size() - 4) + ".json";
    std::error_code ec;
    std::filesystem::remove(slot.result_path, ec);
    std::vector<std::string> args{"run-worker",
                                  "--node",
                                  descriptor_path_,
                                  "--principal",
                                  "worker-" + std::to_string(s),
                                  "--config",
                                  c_.engine_run_config_path,
                                  "--workload",
                                  c_.engine_workload_path,
                                  "--index",
                                  std::to_string(s),
                                  "--workers",
                                  std::to_string(c_.engine_slots),
                                  "--in-flight",
                                  "4",
                                  "--result",
                                  slot.result_path};
    if (c_.channel_only) args.push_back("--channel-only");
    return args;
  }

  // An engine that ended: killed is fine; otherwise it must have served its
  // whole share exactly, through the node or privately after losing it.
  void judge_engine(uint32_t s) {
    WorkerSlot& slot = slots_[s];
    const int status = *slot.process.status;
    const std::string name = "engine slot " + std::to_string(s) + " (pid " + std::to_string(slot.process.pid) + ")";
    if (slot.fault == FaultKind::worker_sigkill || slot.fault == FaultKind::worker_hang ||
        slot.fault == FaultKind::worker_sigterm) {
      if (status != 128 + SIGKILL && status != 128 + SIGTERM && status != 0)
        violation(name + " was killed but exited with status " + std::to_string(status) + ": " +
                  tail_of(read_file(slot.process.log)));
      return;
    }
    const std::string output = read_file(slot.process.log);
    // Status 2, node_unreachable: it could not connect at all (its node had
    // just died); nothing was admitted. Counted, as for `kvrt worker`.
    if (status == 2 && output.find("node_unreachable") != std::string::npos) {
      ++report_.workers_unreachable;
      return;
    }
    if (status != 0) {
      violation(name + " exited with status " + std::to_string(status) + ": " + tail_of(output));
      return;
    }
    Result<EngineResult> r = engine_result_from_json(read_file(slot.result_path), slot.result_path);
    if (!r.ok()) {
      violation(name + " left no readable result: " + r.error().describe());
      return;
    }
    for (const std::string& v : add_engine_result(report_, *r, name)) violation(v);
  }

  // The summary line `kvrt worker --json` prints, if it got that far.
  std::optional<nlohmann::json> summary_of(const std::string& output) const {
    const size_t line = output.rfind("{\"worker\"");
    if (line == std::string::npos) return std::nullopt;
    nlohmann::json j = nlohmann::json::parse(output.substr(line, output.find('\n', line) - line), nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
  }

  // Judges a worker that exited: how it ended must follow from what was done
  // to it. True when it stopped on node_lost (status 1).
  bool judge_worker(uint32_t s, bool node_died) {
    if (is_engine(s)) {
      judge_engine(s);
      return false;
    }
    WorkerSlot& slot = slots_[s];
    const int status = *slot.process.status;
    const std::string output = read_file(slot.process.log);
    const std::optional<nlohmann::json> summary = summary_of(output);
    if (summary)
      for (const std::string& v :
           add_worker_summary(report_, worker_p99_us_, *summary, "worker slot " + std::to_string(s)))
        violation(v);
    const std::string name = "worker slot " + std::to_string(s) + " (pid " + std::to_string(slot.process.pid) + ")";
    // A transport fault's proxy forgets the worker: it may have exited
    // before its next frame.
    if (slot.fault == FaultKind::transport && proxy_) proxy_->disarm(slot.process.pid);
    const WorkerVerdict verdict = judge_worker_exit(slot.fault, status, output, summary.has_value(), node_died, name);
    if (!verdict.violation.empty()) violation(verdict.violation);
    switch (verdict.ending) {
      case WorkerEnding::completed:
        ++report_.workers_completed;
        break;
      case WorkerEnding::transport_interrupted:
        ++report_.transport_interrupted;
        break;
      case WorkerEnding::unreachable:
        ++report_.workers_unreachable;
        break;
      case WorkerEnding::node_lost:
        return true;
      case WorkerEnding::expected:
      case WorkerEnding::violation:
        break;
    }
    return false;
  }

  void tend_workers(bool respawn) {
    const auto now = Clock::now();
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      WorkerSlot& slot = slots_[s];
      if (slot.resume_at && now >= *slot.resume_at && slot.process.running()) {
        ::kill(slot.process.pid, SIGCONT);
        slot.resume_at.reset();
      }
      if (slot.hung_session) {
        const auto seen = lost_seen_.find(*slot.hung_session);
        if (seen != lost_seen_.end()) {
          hung_reclaim_ms_.push_back(std::chrono::duration<double, std::milli>(seen->second - slot.hung_at).count());
          slot.hung_session.reset();
        } else if (now >= next_log_scan_) {
          scan_node_log();
          next_log_scan_ = now + std::chrono::milliseconds(10);
        }
      }
      if (slot.hung_until && now >= *slot.hung_until && slot.process.running()) {
        slot.hung_session.reset();  // not reclaimed while hung: the end-of-campaign check judges it
        slot.process.kill_and_reap();
        slot.hung_until.reset();
      }
      if (slot.process.pid > 0 && slot.process.poll()) {
        slot.hung_session.reset();  // a session id names this process only
        judge_worker(s, /*node_died=*/false);
        slot.process = Child{};
        if (respawn) spawn_worker(s);
      }
    }
  }

  Status inject(const FaultEvent& e) {
    last_fault_ = std::string(to_string(e.kind)) + " at " + std::to_string(e.at_ms) + " ms";
    const size_t k = static_cast<size_t>(e.kind);
    if (e.kind == FaultKind::node_sigkill) {
      ++report_.injected[k];
      return kill_and_restart_node();
    }
    if (e.kind == FaultKind::fault_point) {
      ++report_.injected[k];
      arm_fault_point(e);
      return Status::success();
    }
    if (e.kind == FaultKind::hostile_client) return start_hostile(e);
    if (e.kind == FaultKind::namespace_update) {
      ++report_.injected[k];
      update_namespace(e);
      return Status::success();
    }
    WorkerSlot& slot = slots_.at(e.slot);
    // Engines reach the node's channel directly: transport faults are for
    // `kvrt worker` slots.
    if (e.kind == FaultKind::transport && is_engine(e.slot)) {
      ++report_.skipped[k];
      return Status::success();
    }
    // One fault per process: a stopped or already faulted worker is left to
    // the fault it has.
    if (!slot.process.running() || slot.fault) {
      ++report_.skipped[k];
      return Status::success();
    }
    ++report_.injected[k];
    slot.fault = e.kind;
    switch (e.kind) {
      case FaultKind::worker_sigkill:
        ::kill(slot.process.pid, SIGKILL);
        break;
      case FaultKind::worker_sigterm:
        ::kill(slot.process.pid, SIGTERM);
        break;
      case FaultKind::worker_sigstop:
        ::kill(slot.process.pid, SIGSTOP);
        slot.resume_at = Clock::now() + std::chrono::milliseconds(c_.stop_ms);
        break;
      case FaultKind::worker_hang:
        // Left stopped past the node's heartbeat timeout: the node must
        // reclaim its session (the end-of-campaign check proves it did).
        ::kill(slot.process.pid, SIGSTOP);
        slot.hung_at = Clock::now();
        slot.hung_until = slot.hung_at + std::chrono::milliseconds(c_.settle_timeout_ms / 2);
        slot.hung_session = session_of(read_file(slot.process.log));
        break;
      case FaultKind::transport:
        if (proxy_) arm_transport(e, slot.process.pid);
        break;
      case FaultKind::node_sigkill:
      case FaultKind::fault_point:
      case FaultKind::hostile_client:
      case FaultKind::namespace_update:
        break;
    }
    return Status::success();
  }

  // SIGKILL of the node: every running worker must notice within the
  // settle timeout and exit with node_lost; a new node on the same
  // descriptor must reclaim the dead one's segments and start at the next
  // pool generation. Then every slot gets a fresh worker.
  Status kill_and_restart_node() {
    const NodeDescriptor dead = descriptor_;
    // Stopped workers cannot notice anything: they are killed with the node.
    for (WorkerSlot& slot : slots_)
      if (slot.process.running() && (slot.resume_at || slot.hung_until)) {
        slot.hung_session.reset();  // killed with the node: not reclaimed by it
        slot.process.kill_and_reap();
        slot.fault = FaultKind::worker_sigkill;
      }
    collect_fired();
    admin_.reset();
    const Clock::time_point killed = Clock::now();
    node_.kill_and_reap();
    const auto deadline = killed + std::chrono::milliseconds(c_.settle_timeout_ms);
    while (true) {
      bool any = false;
      for (uint32_t s = 0; s < slots_.size(); ++s) {
        WorkerSlot& slot = slots_[s];
        if (slot.process.pid <= 0) continue;
        // An engine does not stop with its node: it goes on privately and
        // reconnects to the new one (judged whenever it ends).
        if (is_engine(s) && !slot.process.poll()) continue;
        if (!slot.process.poll()) {
          any = true;
          continue;
        }
        if (judge_worker(s, /*node_died=*/true))
          detection_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
        slot.process = Child{};
      }
      if (!any) break;
      if (Clock::now() > deadline) {
        for (uint32_t s = 0; s < slots_.size(); ++s)
          if (slots_[s].process.running()) {
            violation("worker slot " + std::to_string(s) + " still ran " + std::to_string(c_.settle_timeout_ms) +
                      " ms after its node was killed");
            slots_[s].process.kill_and_reap();
            slots_[s].process = Child{};
          }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The hostile client's session is lost with the node. It is collected
    // once it has noticed (here or by the main loop), never waited for:
    // its own calls may take longer to fail than the workers', and neither
    // the workers' detection times nor the restart are its to delay.
    collect_hostile(/*wait=*/false);
    KVRT_TRY(start_node());
    restart_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
    ++report_.node_restarts;
    for (const PoolAttachment& p : dead.pools)
      if (!p.by_descriptor && std::filesystem::exists("/dev/shm/" + p.segment_name))
        violation("the restarted node left the dead node's segment " + p.segment_name);
    for (size_t g = 0; g < descriptor_.pools.size() && g < dead.pools.size(); ++g)
      if (descriptor_.pools[g].generation.value != dead.pools[g].generation.value + 1)
        violation("the restarted node's pool " + std::to_string(g) + " is at generation " +
                  std::to_string(descriptor_.pools[g].generation.value) + ", not one past " +
                  std::to_string(dead.pools[g].generation.value));
    for (uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].process.pid <= 0) spawn_worker(s);
    return Status::success();
  }

  // A live-node fuzzer session beside the honest workers, on its own thread
  // for hostile_ms; one at a time (a fault due while one runs is skipped).
  Status start_hostile(const FaultEvent& e) {
    const size_t k = static_cast<size_t>(e.kind);
    if (hostile_.valid()) {
      ++report_.skipped[k];
      return Status::success();
    }
    Result<std::string> token = read_token_file(descriptor_.token_path(c_.hostile_principal));
    if (!token.ok())
      return make_error(ErrorCode::config_field,
                        "hostile_client faults need a worker principal \"" + c_.hostile_principal + "\" in " +
                            c_.node_config_path + ": " + token.error().reason,
                        "hostile_principal");
    HostileClientOptions o;
    o.node = descriptor_;
    o.token_hex = *token;
    o.name = c_.hostile_principal;
    o.seed = splitmix64(c_.seed ^ e.slot ^ (e.at_ms << 20));
    o.duration = std::chrono::milliseconds(c_.hostile_ms);
    o.call_timeout = std::chrono::milliseconds(c_.settle_timeout_ms);
    hostile_ = std::async(std::launch::async, [o] { return run_hostile_client(o); });
    ++report_.injected[k];
    return Status::success();
  }

  // Adds a finished hostile run to the report; `wait`: until it finishes.
  void collect_hostile(bool wait) {
    if (!hostile_.valid()) return;
    if (!wait && hostile_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    const Result<HostileClientSummary> r = hostile_.get();
    if (!r.ok()) {
      // It could not connect: the node was being killed or restarted. Typed
      // and counted; anything else is a violation.
      const ErrorCode c = r.error().code;
      if (c == ErrorCode::node_unreachable || c == ErrorCode::node_lost || c == ErrorCode::session_ended)
        ++report_.hostile.could_not_connect;
      else
        violation("the hostile client failed: " + r.error().describe());
      return;
    }
    ChaosReport::HostileTotals& h = report_.hostile;
    ++h.runs;
    h.requests += r->requests_channel + r->requests_middleman;
    h.requests_channel += r->requests_channel;
    h.mutated += r->mutated;
    h.receipts += r->receipts;
    h.typed_errors += r->typed_errors;
    h.frames_refused += r->frames_refused;
    h.unexpected += r->unexpected;
    if (r->unexpected > 0)
      violation("the hostile client got " + std::to_string(r->unexpected) +
                " answers that were neither a receipt nor a typed error; the first: " + r->first_unexpected);
  }

  // The session id in the line `kvrt worker` prints once its hello was
  // accepted ("kvrt worker NAME: session N (pid P)"); none before that.
  static std::optional<uint64_t> session_of(const std::string& worker_log) {
    const size_t at = worker_log.find(": session ");
    if (at == std::string::npos) return std::nullopt;
    const char* first = worker_log.c_str() + at + 10;
    char* last = nullptr;
    const unsigned long long id = std::strtoull(first, &last, 10);
    if (last == first) return std::nullopt;
    return id;
  }

  // Reads what the node logged since the last scan and notes when each
  // "session=N worker lost" line was first seen (the gateway's reclaim of a
  // killed or hung worker, actors/gateway_actor.cpp).
  void scan_node_log() {
    std::ifstream in(node_.log, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(node_log_offset_));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t complete = text.rfind('\n');
    if (complete == std::string::npos) return;
    node_log_offset_ += complete + 1;
    const auto now = Clock::now();
    std::istringstream lines(text.substr(0, complete + 1));
    for (std::string line; std::getline(lines, line);) {
      const size_t lost = line.find(" worker lost");
      const size_t at = line.find("session=");
      if (lost == std::string::npos || at == std::string::npos || at > lost) continue;
      lost_seen_.emplace(std::strtoull(line.c_str() + at + 8, nullptr, 10), now);
    }
  }

  void validate_node() {
    Result<NodeStats> stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
    if (!stats.ok()) {
      violation("the node's statistics could not be read: " + stats.error().describe());
      return;
    }
    ++report_.validations;
    for (const OwnerStats& owner : stats->owners)
      if (!owner.validate_ok) violation(owner.owner + ".validate(): " + owner.validate_error);
    sample_timeline(*stats);
  }

  // The node's resident set [bytes], from /proc/<pid>/statm (field 2, pages).
  int64_t node_rss_bytes() const {
    std::ifstream statm("/proc/" + std::to_string(node_.pid) + "/statm");
    int64_t size = 0, resident = 0;
    if (!(statm >> size >> resident)) return 0;
    return resident * ::sysconf(_SC_PAGESIZE);
  }

  void sample_timeline(const NodeStats& stats) {
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    const int64_t ops = stats.value("allocator", "operations").value_or(0);
    uint64_t faults = 0;
    for (uint64_t n : report_.injected) faults += n;
    TimelinePoint p{t, 0, faults - faults_at_last_sample_, node_rss_bytes()};
    // A restarted node counts from 0 again.
    const int64_t done = ops >= last_ops_ ? ops - last_ops_ : ops;
    if (t > last_sample_s_) p.allocator_ops_per_s = static_cast<double>(done) / (t - last_sample_s_);
    report_.timeline.push_back(p);
    last_ops_ = ops;
    last_sample_s_ = t;
    faults_at_last_sample_ = faults;
  }

  // First and last resident set, and the slope after warm-up (least squares).
  void summarize_rss() {
    std::vector<std::pair<double, double>> kept;
    for (const TimelinePoint& p : report_.timeline)
      if (p.node_rss_bytes > 0 && p.t_s >= 0.2 * c_.duration_s)
        kept.emplace_back(p.t_s / 60.0, static_cast<double>(p.node_rss_bytes) / (1 << 20));
    if (!report_.timeline.empty()) {
      report_.node_rss_first_mib = static_cast<double>(report_.timeline.front().node_rss_bytes) / (1 << 20);
      report_.node_rss_last_mib = static_cast<double>(report_.timeline.back().node_rss_bytes) / (1 << 20);
    }
    if (kept.size() < 2) return;
    double mx = 0, my = 0;
    for (const auto& [x, y] : kept) mx += x, my += y;
    mx /= kept.size();
    my /= kept.size();
    double sxy = 0, sxx = 0;
    for (const auto& [x, y] : kept) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
    report_.node_rss_slope_mib_per_min = sxx > 0 ? sxy / sxx : 0;
  }

  // No new faults: resume stopped workers, kill hung ones, let the rest run
  // to their end; then the node must be quiescent, and its clean shutdown
  // must leave nothing behind.
  void finish() {
    last_fault_ = "end of campaign";
    for (WorkerSlot& slot : slots_) {
      if (slot.process.running() && slot.resume_at) {
        ::kill(slot.process.pid, SIGCONT);
        slot.resume_at.reset();
      }
      if (slot.process.running() && slot.hung_until) {
        slot.process.kill_and_reap();
        slot.hung_until.reset();
      }
    }
    const auto deadline =
        Clock::now() + std::chrono::seconds(c_.worker_duration_s) + std::chrono::milliseconds(c_.settle_timeout_ms);
    while (std::any_of(slots_.begin(), slots_.end(), [](const WorkerSlot& s) { return s.process.pid > 0; })) {
      tend_workers(/*respawn=*/false);
      if (Clock::now() > deadline) {
        for (uint32_t s = 0; s < slots_.size(); ++s)
          if (slots_[s].process.running()) {
            violation("worker slot " + std::to_string(s) + " did not finish");
            slots_[s].process.kill_and_reap();
            slots_[s].process = Child{};
          }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // The hostile and the admin sessions first: they are sessions too, and
    // the node must end with none.
    collect_hostile(/*wait=*/true);
    collect_fired();
    admin_.reset();
    check_quiescent();
    const NodeDescriptor last = descriptor_;
    ::kill(node_.pid, SIGTERM);
    const auto stop_deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms);
    while (!node_.poll()) {
      if (Clock::now() > stop_deadline) {
        violation("the node did not shut down on SIGTERM");
        node_.kill_and_reap();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (node_.status != 0) violation("the node exited with status " + std::to_string(*node_.status) + " on SIGTERM");
    if (std::filesystem::exists(descriptor_path_)) violation("the node left its descriptor behind");
    if (std::filesystem::exists(last.token_dir)) violation("the node left its token directory (sockets) behind");
    for (const std::string& name : segments_seen_)
      if (std::filesystem::exists("/dev/shm/" + name)) violation("segment " + name + " outlived the campaign");
  }

  void check_quiescent() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(c_.settle_timeout_ms);
    Result<NodeStats> stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
    while (stats.ok() && stats->value("node", "workers_connected") != 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stats = read_node_stats(descriptor_, /*validate=*/true, std::chrono::seconds(10));
    }
    if (!stats.ok()) {
      violation("the node's final statistics could not be read: " + stats.error().describe());
      return;
    }
    ++report_.validations;
    for (const OwnerStats& owner : stats->owners)
      if (!owner.validate_ok) violation(owner.owner + ".validate() at the end: " + owner.validate_error);
    // What stays held with no session: only the radix index's cache, one
    // node lease per cached block and one live block per cached page in
    // each pool (the hash chain holds nothing: its blocks are free, tagged).
    const std::optional<int64_t> radix = stats->value("prefix_index", "radix");
    const int64_t cached_pages = radix ? stats->value("prefix_index", "cached_pages").value_or(-1) : 0;
    const int64_t cached_blocks = radix ? stats->value("prefix_index", "cached_blocks").value_or(-1) : 0;
    const std::tuple<const char*, const char*, int64_t> expected[] = {{"node", "workers_connected", 0},
                                                                      {"allocator", "leaked_blocks", 0},
                                                                      {"allocator", "refcount_delta", 0},
                                                                      {"allocator", "live_requests", 0},
                                                                      {"allocator", "live_leases", cached_blocks},
                                                                      {"allocator", "node_leases", cached_blocks},
                                                                      {"allocator", "pool0_live_blocks", cached_pages},
                                                                      {"node", "reuse_open_attempts", 0}};
    for (const auto& [owner, name, want] : expected) {
      const std::optional<int64_t> v = stats->value(owner, name);
      if (v != want)
        violation(std::string(owner) + "." + name + " is " + (v ? std::to_string(*v) : std::string("missing")) +
                  " once every worker is gone (expected " + std::to_string(want) + ")");
    }
    if (radix && stats->value("prefix_index", "path_leases") != 0)
      violation("the radix index still holds path leases once every worker is gone");
  }

  const ChaosOptions& o_;
  const ChaosConfig& c_;
  ChaosReport report_;
  Clock::time_point start_;
  std::string descriptor_path_;
  NodeDescriptor descriptor_;
  Child node_;
  uint32_t node_starts_ = 0;
  std::vector<WorkerSlot> slots_;
  std::set<std::string> segments_seen_;
  std::vector<double> detection_ms_, restart_ms_, hung_reclaim_ms_;
  // The current node's log, scanned for reclaimed sessions (scan_node_log).
  uint64_t node_log_offset_ = 0;
  std::map<uint64_t, Clock::time_point> lost_seen_;
  Clock::time_point next_log_scan_{};
  std::vector<double> worker_p99_us_;  // each finished worker's own p99 [us]
  int64_t last_ops_ = 0;
  double last_sample_s_ = 0;
  uint64_t faults_at_last_sample_ = 0;
  std::unique_ptr<ChannelFaultProxy> proxy_;           // null: workers reach the node's channel directly
  std::optional<ChaosAdminSession> admin_;             // none: the campaign neither arms points nor updates namespaces
  std::future<Result<HostileClientSummary>> hostile_;  // the hostile client running now, if any
  std::string last_fault_ = "none";
};

}  // namespace

Result<ChaosReport> run_chaos_campaign(const ChaosOptions& options) {
  if (options.kvrt_binary.empty())
    return make_error(ErrorCode::invalid_argument, "no kvrt binary to run the node and workers", "kvrt_binary");
  Campaign campaign(options);
  Result<ChaosReport> report = campaign.run();
  const ChaosConfig& c = options.config;
  const bool faulted = std::any_of(c.per_minute.begin(), c.per_minute.end(), [](uint32_t r) { return r > 0; });
  if (!report.ok() || c.baseline_s == 0 || !faulted) return report;
  // The same run without faults, in its own directory: its own node, its
  // own descriptor and logs, so nothing of the campaign carries over.
  ChaosOptions clean = options;
  clean.config.channel_proxy = c.channel_proxy || c.per_minute[static_cast<size_t>(FaultKind::transport)] > 0;
  clean.config.per_minute.fill(0);
  clean.config.duration_s = c.baseline_s;
  clean.out_dir = options.out_dir + "/baseline";
  if (options.on_progress)
    options.on_progress("the same run without faults for " + std::to_string(c.baseline_s) + " s");
  Campaign baseline(clean);
  Result<ChaosReport> b = baseline.run();
  if (!b.ok()) return b.error();
  report->baseline = ChaosReport::Baseline{b->wall_s, b->requests, median_allocator_ops_per_s(*b)};
  for (Violation v : b->violations) {
    v.what = "baseline (no faults): " + v.what;
    report->violations.push_back(std::move(v));
  }
  return report;
}

}  // namespace kvrt::chaos
