#pragma once
// The configuration of `kvrt chaos` (config/chaos.toml) and the seeded fault
// schedule it draws. A campaign starts a node and worker processes and
// injects process faults at seeded moments; the same seed and config give the
// same schedule, so `--seed N` replays a campaign that found a violation.
//
// Each fault kind arrives as a Poisson process of its own rate (events per
// minute): exponential gaps drawn by inverse transform from SplitMix64, not
// from <random>'s distributions, whose output differs between standard
// libraries. A worker fault names a worker slot; whichever process serves
// that slot when the fault is due receives it.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt::chaos {

enum class FaultKind : uint8_t {
  worker_sigkill = 0,  // killed; a fresh worker takes its slot
  worker_sigstop = 1,  // stopped, resumed after stop_ms (a pause the node must ride out)
  worker_hang = 2,     // stopped and left hung: the node's heartbeats reclaim its session
  worker_sigterm = 3,  // asked to terminate (default action: exit without cleanup)
  node_sigkill = 4,    // the node killed; a new node on the same descriptor path
  fault_point = 5,     // an owner fault point armed through the node's admin route (fires on a later reach)
  hostile_client = 6,  // a live-node fuzzer session for hostile_ms (tools/chaos/hostile_client.hpp)
  transport =
      7,  // one frame of a worker's session channel delayed, duplicated, dropped or cut (channel_fault_proxy.hpp)
  // A weights invalidation or a purge of one of the node's namespaces
  // (admin routes, 0x01A, 0x0CE) while the workers serve it: they must be
  // refused as stale, authorize again and go on; armed purge fault points
  // are reached here.
  namespace_update = 8,
};
inline constexpr size_t kFaultKindCount = 9;
std::string_view to_string(FaultKind kind);
// Whether a fault's slot names a worker slot. A fault point's, a hostile
// client's and a namespace update's slot is a draw of their own (which point,
// which session's seed, which namespace); a node kill has none.
constexpr bool is_worker_fault(FaultKind kind) {
  return kind != FaultKind::node_sigkill && kind != FaultKind::fault_point && kind != FaultKind::hostile_client &&
         kind != FaultKind::namespace_update;
}

struct ChaosConfig {
  std::string config_path;       // the file read (absolute)
  std::string node_config_path;  // absolute (relative paths resolve against the chaos config)
  // Empty: every node runs node_config_path. Otherwise node starts alternate
  // between the two (the first runs node_config_path), so that one campaign
  // reaches the owners only one of them runs (the radix index's points).
  std::string alternate_node_config_path;
  uint64_t seed = 1;                   // the schedule's and the workers' seeds derive from it
  uint32_t duration_s = 60;            // faults are injected for this long [s]
  uint32_t workers = 4;                // worker slots [processes]
  uint32_t worker_duration_s = 4;      // each worker starts requests this long, then a fresh one replaces it [s]
  uint32_t stop_ms = 300;              // how long a worker_sigstop lasts [ms]
  uint32_t settle_timeout_ms = 15000;  // the most a node may take to reclaim a session or a worker to exit [ms]
  uint32_t validate_every_ms = 1000;   // the node's validate() between faults [ms]
  // After the campaign, the same node, workers and seed for this long with
  // no fault: the throughput the faults are compared with (0: no baseline) [s].
  uint32_t baseline_s = 0;
  std::array<uint32_t, kFaultKindCount> per_minute{};  // mean rate of each kind [events/min]
  // The admin principal of the node config that arms fault points and
  // updates namespaces (its token file is in the node's token directory);
  // needed when fault_point or namespace_update > 0.
  std::string admin_principal = "chaos-admin";
  // The worker principal the hostile client connects as (needed when
  // hostile_client > 0), and how long each of its runs lasts [ms].
  std::string hostile_principal = "chaos-hostile";
  uint32_t hostile_ms = 2000;
  // transport faults: every worker's session channel then runs through the
  // campaign's proxy; a delay fault holds one frame this long [ms], and a
  // worker's call with no reply fails after worker_call_timeout_ms [ms]
  // (the middleman serves the rest of its session).
  uint32_t transport_delay_ms = 200;
  uint32_t worker_call_timeout_ms = 3000;
  // Workers reach the channel through the proxy even with no transport
  // fault scheduled: the baseline of a campaign that has them, so that both
  // runs pay the same extra hop.
  bool channel_proxy = false;
  // Slots [0, engine_slots) run `kvrt run`'s engine loop (`kvrt run-worker`:
  // the reference model's real K/V, every request replayed without reuse
  // and compared) over their share of engine_workload, instead of `kvrt
  // worker`; the engine's model comes from engine_run_config's [model]. An
  // engine outlives its node: it finishes privately and reconnects.
  uint32_t engine_slots = 0;
  // Every worker and engine opens its session on the node's session channel
  // and never connects the middleman (ClientOptions::channel_only): the node
  // then keeps nothing of a worker process once its session ends, which a
  // soak's RSS slope shows.
  bool channel_only = false;
  std::string engine_run_config_path;  // absolute
  std::string engine_workload_path;    // absolute
};

// The most faults one campaign may schedule (rates x duration).
inline constexpr uint64_t kMaxScheduledFaults = 1'000'000;

// Reads [chaos] and [faults]; unknown keys are errors, each naming file, line and field.
Result<ChaosConfig> parse_chaos_config(std::string_view text, const std::string& origin);
Result<ChaosConfig> load_chaos_config(const std::string& path);

struct FaultEvent {
  uint64_t at_ms = 0;  // since the campaign started [ms]
  FaultKind kind = FaultKind::worker_sigkill;
  // Worker slot (worker faults, transport); fault_point: which registered
  // point (modulo their count); hostile_client: its seed; namespace_update:
  // which namespace (modulo their count; bit 16: purge, else invalidate).
  uint32_t slot = 0;
  friend bool operator==(const FaultEvent&, const FaultEvent&) = default;
};

// Every fault of the campaign in time order (ties: kind order). Pure: the
// same config and seed give the same schedule on every machine.
std::vector<FaultEvent> make_fault_schedule(const ChaosConfig& config, uint64_t seed);

}  // namespace kvrt::chaos
