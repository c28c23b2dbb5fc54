#pragma once
// The campaign's worker slots: each runs one process at a time, `kvrt
// worker` (the shared-prefix workload, every reused row read back) or, for
// the first engine_slots, an engine (`kvrt run-worker` over its share of the
// engine workload). Worker faults are done to them here, and every process
// that ends is judged by what was done to it (chaos_worker_results.hpp),
// then replaced.
#include <optional>
#include <string>
#include <vector>

#include "tools/chaos/channel_fault_proxy.hpp"
#include "tools/chaos/chaos_child.hpp"
#include "tools/chaos/chaos_node.hpp"
#include "tools/chaos/chaos_record.hpp"

namespace kvrt::chaos {

class WorkerSlots {
 public:
  // `proxy` null: workers reach the node's channel directly.
  WorkerSlots(const ChaosOptions& options, CampaignRecord& record, ChaosNode& node, ChannelFaultProxy* proxy);

  // A fresh process in every slot that has none.
  void fill();
  // Resumes stopped workers and kills hung ones when their time comes,
  // notes hung sessions the node reclaimed, and judges every process that
  // ended; `respawn`: replaces it.
  void tend(bool respawn);
  // A worker fault (worker_sigkill, worker_sigterm, worker_sigstop,
  // worker_hang, transport) done to its slot's process; skipped for a slot
  // with no running process or one already faulted.
  void inject(const FaultEvent& e);
  // Before the node is killed: every process in a slot learns that its node
  // died (how it may end depends on it), and stopped workers, which cannot
  // notice anything, die with it.
  void node_dies();
  // After: every running `kvrt worker` must exit on node_lost within the
  // settle timeout (the detection figure, from `killed`); engines go on
  // privately and are judged whenever they end.
  void await_node_death(Clock::time_point killed);
  // No new faults: stopped workers resume, hung ones die, and the rest run
  // to their end (no respawn).
  void finish();

  const std::vector<double>& detection_ms() const { return detection_ms_; }
  const std::vector<double>& hung_reclaim_ms() const { return hung_reclaim_ms_; }
  const std::vector<double>& worker_call_p99_us() const { return worker_p99_us_; }

 private:
  struct Slot {
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
    bool node_died = false;   // a node was killed while this process ran
  };

  bool is_engine(uint32_t s) const { return s < c_.engine_slots; }
  void spawn(uint32_t s);
  std::vector<std::string> worker_args(uint32_t s) const;
  std::vector<std::string> engine_args(uint32_t s, const std::string& log);
  void arm_transport(const FaultEvent& e, int pid);
  void judge_engine(uint32_t s, bool node_died);
  bool judge_worker(uint32_t s);
  void kill_running(const std::string& why);

  const ChaosOptions& o_;
  const ChaosConfig& c_;
  CampaignRecord& record_;
  ChaosNode& node_;
  ChannelFaultProxy* proxy_;
  std::vector<Slot> slots_;
  std::vector<double> detection_ms_, hung_reclaim_ms_;
  std::vector<double> worker_p99_us_;  // each finished worker's own p99 [us]
};

}  // namespace kvrt::chaos
