#include "tools/chaos/chaos_worker_slots.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/run_worker_args.hpp"
#include "services/common/splitmix64.hpp"
#include "tools/chaos/chaos_worker_results.hpp"

namespace kvrt::chaos {

namespace {

// The summary line `kvrt worker --json` prints, if it got that far.
std::optional<nlohmann::json> summary_of(const std::string& output) {
  const size_t line = output.rfind("{\"worker\"");
  if (line == std::string::npos) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(output.substr(line, output.find('\n', line) - line), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The session id in the line `kvrt worker` prints once its hello was
// accepted ("kvrt worker NAME: session N (pid P)"); none before that.
std::optional<uint64_t> session_of(const std::string& worker_log) {
  const size_t at = worker_log.find(": session ");
  if (at == std::string::npos) return std::nullopt;
  const char* first = worker_log.c_str() + at + 10;
  char* last = nullptr;
  const unsigned long long id = std::strtoull(first, &last, 10);
  if (last == first) return std::nullopt;
  return id;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

WorkerSlots::WorkerSlots(const ChaosOptions& options, CampaignRecord& record, ChaosNode& node, ChannelFaultProxy* proxy)
    : o_(options), c_(options.config), record_(record), node_(node), proxy_(proxy), slots_(options.config.workers) {}

void WorkerSlots::fill() {
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].process.pid <= 0) spawn(s);
}

void WorkerSlots::spawn(uint32_t s) {
  Slot& slot = slots_[s];
  const std::string log =
      o_.out_dir + "/logs/worker-" + std::to_string(s) + "-" + std::to_string(slot.started) + ".log";
  const std::vector<std::string> args = is_engine(s) ? engine_args(s, log) : worker_args(s);
  Result<pid_t> pid = spawn_child(o_.kvrt_binary, args, log);
  ++slot.started;
  slot.fault.reset();
  slot.resume_at.reset();
  slot.hung_until.reset();
  slot.node_died = false;
  if (!pid.ok()) {
    record_.violation("worker slot " + std::to_string(s) + " could not start: " + pid.error().describe());
    slot.process = Child{};
    return;
  }
  slot.process = Child{*pid, log, std::nullopt};
  ++record_.report.workers_started;
}

std::vector<std::string> WorkerSlots::worker_args(uint32_t s) const {
  const uint64_t seed = splitmix64(c_.seed ^ (uint64_t(s) << 32) ^ slots_[s].started);
  std::vector<std::string> args{"worker",
                                "--node",
                                node_.descriptor_path(),
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

// An engine slot: `kvrt run-worker` over its share of the engine workload,
// reconnecting to the campaign's descriptor path when its node dies; its
// result JSON beside its log.
std::vector<std::string> WorkerSlots::engine_args(uint32_t s, const std::string& log) {
  Slot& slot = slots_[s];
  slot.result_path = log.substr(0, log.size() - 4) + ".json";
  std::error_code ec;
  std::filesystem::remove(slot.result_path, ec);
  std::vector<std::string> args =
      run_worker_args(RunWorkerArgs{node_.descriptor_path(), "worker-" + std::to_string(s), c_.engine_run_config_path,
                                    c_.engine_workload_path, s, c_.engine_slots, 4, slot.result_path});
  if (c_.channel_only) args.push_back("--channel-only");
  return args;
}

// One frame of the slot's worker, chosen from the event: the kind by a hash
// of its moment, so the same seed does the same thing.
void WorkerSlots::arm_transport(const FaultEvent& e, int pid) {
  const auto kind =
      static_cast<TransportFaultKind>(splitmix64(e.at_ms ^ (uint64_t(e.slot) << 40)) % kTransportFaultKindCount);
  proxy_->arm(pid, TransportFault{kind, c_.transport_delay_ms});
}

// An engine that ended: killed is fine; otherwise it must have served its
// whole share exactly, through the node or privately after losing it.
void WorkerSlots::judge_engine(uint32_t s, bool node_died) {
  Slot& slot = slots_[s];
  const std::string name = "engine slot " + std::to_string(s) + " (pid " + std::to_string(slot.process.pid) + ")";
  const WorkerVerdict verdict =
      judge_engine_exit(slot.fault, *slot.process.status, read_log(slot.process.log), node_died, name);
  switch (verdict.ending) {
    case WorkerEnding::violation:
      record_.violation(verdict.violation);
      return;
    case WorkerEnding::unreachable:
      ++record_.report.workers_unreachable;
      return;
    case WorkerEnding::completed:
      break;
    case WorkerEnding::expected:
    case WorkerEnding::node_lost:
    case WorkerEnding::transport_interrupted:
      return;
  }
  Result<EngineResult> r = engine_result_from_json(read_log(slot.result_path), slot.result_path);
  if (!r.ok()) {
    record_.violation(name + " left no readable result: " + r.error().describe());
    return;
  }
  for (const std::string& v : add_engine_result(record_.report, *r, name)) record_.violation(v);
}

// Judges a process that exited: how it ended must follow from what was done
// to it. True when a `kvrt worker` stopped on node_lost (status 1).
bool WorkerSlots::judge_worker(uint32_t s) {
  Slot& slot = slots_[s];
  const bool node_died = slot.node_died;
  if (is_engine(s)) {
    judge_engine(s, node_died);
    return false;
  }
  const int status = *slot.process.status;
  const std::string output = read_log(slot.process.log);
  const std::optional<nlohmann::json> summary = summary_of(output);
  if (summary)
    for (const std::string& v :
         add_worker_summary(record_.report, worker_p99_us_, *summary, "worker slot " + std::to_string(s)))
      record_.violation(v);
  const std::string name = "worker slot " + std::to_string(s) + " (pid " + std::to_string(slot.process.pid) + ")";
  // A transport fault's proxy forgets the worker: it may have exited
  // before its next frame.
  if (slot.fault == FaultKind::transport && proxy_) proxy_->disarm(slot.process.pid);
  const WorkerVerdict verdict = judge_worker_exit(slot.fault, status, output, summary.has_value(), node_died, name);
  if (!verdict.violation.empty()) record_.violation(verdict.violation);
  switch (verdict.ending) {
    case WorkerEnding::completed:
      ++record_.report.workers_completed;
      break;
    case WorkerEnding::transport_interrupted:
      ++record_.report.transport_interrupted;
      break;
    case WorkerEnding::unreachable:
      ++record_.report.workers_unreachable;
      break;
    case WorkerEnding::node_lost:
      return true;
    case WorkerEnding::expected:
    case WorkerEnding::violation:
      break;
  }
  return false;
}

void WorkerSlots::tend(bool respawn) {
  const auto now = Clock::now();
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.resume_at && now >= *slot.resume_at && slot.process.running()) {
      ::kill(slot.process.pid, SIGCONT);
      slot.resume_at.reset();
    }
    if (slot.hung_session) {
      if (const std::optional<Clock::time_point> at = node_.reclaimed_at(*slot.hung_session)) {
        hung_reclaim_ms_.push_back(std::chrono::duration<double, std::milli>(*at - slot.hung_at).count());
        slot.hung_session.reset();
      }
    }
    if (slot.hung_until && now >= *slot.hung_until && slot.process.running()) {
      slot.hung_session.reset();  // not reclaimed while hung: the end-of-campaign check judges it
      slot.process.kill_and_reap();
      slot.hung_until.reset();
    }
    if (slot.process.pid > 0 && slot.process.poll()) {
      slot.hung_session.reset();  // a session id names this process only
      judge_worker(s);
      slot.process = Child{};
      if (respawn) spawn(s);
    }
  }
}

void WorkerSlots::inject(const FaultEvent& e) {
  const size_t k = static_cast<size_t>(e.kind);
  Slot& slot = slots_.at(e.slot);
  // Engines reach the node's channel directly: transport faults are for
  // `kvrt worker` slots. One fault per process: a stopped or already
  // faulted worker is left to the fault it has.
  if ((e.kind == FaultKind::transport && is_engine(e.slot)) || !slot.process.running() || slot.fault) {
    ++record_.report.skipped[k];
    return;
  }
  ++record_.report.injected[k];
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
      slot.hung_session = session_of(read_log(slot.process.log));
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
}

void WorkerSlots::node_dies() {
  for (Slot& slot : slots_) {
    if (slot.process.pid > 0) slot.node_died = true;
    if (slot.process.running() && (slot.resume_at || slot.hung_until)) {
      slot.hung_session.reset();  // killed with the node: not reclaimed by it
      slot.process.kill_and_reap();
      slot.fault = FaultKind::worker_sigkill;
    }
  }
}

void WorkerSlots::kill_running(const std::string& why) {
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].process.running()) {
      record_.violation("worker slot " + std::to_string(s) + " " + why);
      slots_[s].process.kill_and_reap();
      slots_[s].process = Child{};
    }
}

void WorkerSlots::await_node_death(Clock::time_point killed) {
  const auto deadline = killed + std::chrono::milliseconds(c_.settle_timeout_ms);
  while (true) {
    bool any = false;
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      Slot& slot = slots_[s];
      if (slot.process.pid <= 0) continue;
      // An engine does not stop with its node: it goes on privately and
      // reconnects to the new one (judged whenever it ends).
      if (is_engine(s) && !slot.process.poll()) continue;
      if (!slot.process.poll()) {
        any = true;
        continue;
      }
      if (judge_worker(s)) detection_ms_.push_back(ms_since(killed));
      slot.process = Child{};
    }
    if (!any) return;
    if (Clock::now() > deadline) {
      kill_running("still ran " + std::to_string(c_.settle_timeout_ms) + " ms after its node was killed");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void WorkerSlots::finish() {
  for (Slot& slot : slots_) {
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
  while (std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.process.pid > 0; })) {
    tend(/*respawn=*/false);
    if (Clock::now() > deadline) {
      kill_running("did not finish");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace kvrt::chaos
