#include "tools/chaos/chaos_campaign.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>

#include "tools/chaos/chaos_hostile_slot.hpp"
#include "tools/chaos/chaos_node.hpp"
#include "tools/chaos/chaos_record.hpp"
#include "tools/chaos/chaos_worker_slots.hpp"
#include "tools/report/run_report.hpp"

namespace kvrt::chaos {

namespace {

LatencySummary summarize(const std::vector<double>& ms) {
  return LatencySummary{ms.size(), report::percentile(ms, 50), report::percentile(ms, 99), report::percentile(ms, 100)};
}

// transport faults: every worker's session channel goes through a proxy
// that forwards to the node's channel socket (the same path for every node
// the campaign starts: the descriptor's token directory). Null when the
// campaign has none.
Result<std::unique_ptr<ChannelFaultProxy>> start_proxy(const ChaosConfig& c, const std::string& descriptor_path) {
  if (c.per_minute[static_cast<size_t>(FaultKind::transport)] == 0 && !c.channel_proxy)
    return std::unique_ptr<ChannelFaultProxy>();
  static std::atomic<uint32_t> proxies{0};
  const std::string path = "/tmp/kvrt-chaos-" + std::to_string(::getpid()) + "-" + std::to_string(proxies++) + ".sock";
  return ChannelFaultProxy::start(path, descriptor_path + ".tokens/session.sock");
}

// The schedule applied to the node, the worker slots and the hostile
// client, from start to the end checks. Each part writes what it sees into
// one CampaignRecord.
class Campaign {
 public:
  explicit Campaign(const ChaosOptions& o) : o_(o), c_(o.config), node_(o, record_), hostile_(o.config, record_) {
    record_.report.seed = c_.seed;
    record_.report.workers = c_.workers;
    record_.on_progress = o.on_progress;
  }

  Result<ChaosReport> run() {
    std::error_code ec;
    std::filesystem::create_directories(o_.out_dir + "/logs", ec);
    if (ec) return make_error(ErrorCode::io, "cannot create " + o_.out_dir + "/logs: " + ec.message(), "out");
    const std::vector<FaultEvent> schedule = make_fault_schedule(c_, c_.seed);
    for (const FaultEvent& e : schedule) ++record_.report.scheduled[static_cast<size_t>(e.kind)];
    record_.start = Clock::now();
    Result<std::unique_ptr<ChannelFaultProxy>> proxy = start_proxy(c_, node_.descriptor_path());
    if (!proxy.ok()) return proxy.error();
    proxy_ = std::move(*proxy);
    KVRT_TRY(node_.start());
    workers_.emplace(o_, record_, node_, proxy_.get());
    workers_->fill();
    size_t next = 0;
    const auto end = record_.start + std::chrono::seconds(c_.duration_s);
    auto next_validation = Clock::now() + std::chrono::milliseconds(c_.validate_every_ms);
    auto next_progress = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < end) {
      while (next < schedule.size() && record_.elapsed_ms() >= schedule[next].at_ms) KVRT_TRY(inject(schedule[next++]));
      workers_->tend(/*respawn=*/true);
      hostile_.collect(/*wait=*/false);
      if (Clock::now() >= next_validation) {
        node_.validate();
        next_validation = Clock::now() + std::chrono::milliseconds(c_.validate_every_ms);
      }
      if (o_.on_progress && Clock::now() >= next_progress) {
        o_.on_progress(progress_line());
        next_progress = Clock::now() + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    finish();
    ChaosReport& r = record_.report;
    if (proxy_) {
      r.transport_applied = proxy_->stats().applied;
      proxy_.reset();  // removes its socket
    }
    r.wall_s = record_.elapsed_s();
    r.node_death_detection = summarize(workers_->detection_ms());
    node_.summarize_rss();
    std::vector<double> p99 = workers_->worker_call_p99_us();
    if (!p99.empty()) {
      std::sort(p99.begin(), p99.end());
      r.worker_call_p99_median_us = p99[p99.size() / 2];
      r.worker_call_p99_max_us = p99.back();
    }
    r.node_restart = summarize(restart_ms_);
    r.hung_worker_reclaim = summarize(workers_->hung_reclaim_ms());
    return r;
  }

 private:
  std::string progress_line() const {
    const ChaosReport& r = record_.report;
    return std::to_string(record_.elapsed_ms() / 1000) + " s: " + std::to_string(record_.faults_injected()) +
           " faults, " + std::to_string(r.node_restarts) + " node restarts, " + std::to_string(r.requests) +
           " requests, " + std::to_string(r.violations.size()) + " violations";
  }

  Status inject(const FaultEvent& e) {
    record_.last_fault = std::string(to_string(e.kind)) + " at " + std::to_string(e.at_ms) + " ms";
    const size_t k = static_cast<size_t>(e.kind);
    switch (e.kind) {
      case FaultKind::node_sigkill:
        ++record_.report.injected[k];
        return kill_and_restart_node();
      case FaultKind::fault_point:
        ++record_.report.injected[k];
        node_.arm_fault_point(e);
        return Status::success();
      case FaultKind::hostile_client:
        return hostile_.start(e, node_.descriptor());
      case FaultKind::namespace_update:
        ++record_.report.injected[k];
        node_.update_namespace(e);
        return Status::success();
      case FaultKind::worker_sigkill:
      case FaultKind::worker_sigterm:
      case FaultKind::worker_sigstop:
      case FaultKind::worker_hang:
      case FaultKind::transport:
        workers_->inject(e);
        return Status::success();
    }
    return Status::success();
  }

  // SIGKILL of the node: every running worker must notice within the
  // settle timeout and exit with node_lost; a new node on the same
  // descriptor must reclaim the dead one's segments and start at the next
  // pool generation. Then every slot gets a fresh worker.
  Status kill_and_restart_node() {
    workers_->node_dies();
    const ChaosNode::Killed killed = node_.kill();
    workers_->await_node_death(killed.at);
    // The hostile client's session is lost with the node. It is collected
    // once it has noticed (here or by the main loop), never waited for:
    // its own calls may take longer to fail than the workers', and neither
    // the workers' detection times nor the restart are its to delay.
    hostile_.collect(/*wait=*/false);
    KVRT_TRY(node_.start());
    restart_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed.at).count());
    ++record_.report.node_restarts;
    node_.check_successor(killed.descriptor);
    workers_->fill();
    return Status::success();
  }

  // No new faults: the workers run to their end, then the node must be
  // quiescent, and its clean shutdown must leave nothing behind.
  void finish() {
    record_.last_fault = "end of campaign";
    workers_->finish();
    // The hostile session first: the node must end with none.
    hostile_.collect(/*wait=*/true);
    node_.shut_down();
  }

  const ChaosOptions& o_;
  const ChaosConfig& c_;
  CampaignRecord record_;
  ChaosNode node_;
  HostileSlot hostile_;
  std::unique_ptr<ChannelFaultProxy> proxy_;  // null: workers reach the node's channel directly
  std::optional<WorkerSlots> workers_;        // once the node serves
  std::vector<double> restart_ms_;
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
