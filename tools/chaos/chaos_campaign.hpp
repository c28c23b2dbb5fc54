#pragma once
// One `kvrt chaos` campaign: a `kvrt node` child and worker-slot children
// (`kvrt worker`, the shared-prefix workload whose every reused row is read
// back and compared bitwise), with the seeded schedule of
// tools/chaos/chaos_config.hpp applied to them. What it checks, after
// faults and at the end, and reports as violations with the seed and the
// fault that preceded them:
//   - the node's validate() (every owner), every validate_every_ms;
//   - every worker that ran to its end finished exactly (exit 0, no reuse
//     mismatch); a faulted worker ended the way its fault implies;
//   - a killed node: every running worker exits within settle_timeout_ms
//     with node_lost, and the new node reclaims the dead one's segments and
//     starts at the next pool generation;
//   - at the end: no leaked block, refcount delta 0, no live request, lease
//     or reuse attempt, no worker connected; the node shuts down cleanly and
//     leaves no segment, descriptor or socket behind.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "tools/chaos/channel_fault_proxy.hpp"
#include "tools/chaos/chaos_config.hpp"

namespace kvrt::chaos {

struct ChaosOptions {
  ChaosConfig config;
  std::string kvrt_binary;                              // the executable the children run
  std::string out_dir;                                  // logs, report.json, report.md
  std::function<void(const std::string&)> on_progress;  // one line now and then; may be empty
};

struct Violation {
  uint64_t at_ms = 0;
  std::string what;
  std::string preceding_fault;  // "node_sigkill at 1234 ms", or "none"
};

struct LatencySummary {
  uint64_t count = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// One sample of the node, every validate_every_ms.
struct TimelinePoint {
  double t_s = 0;                  // since the campaign started [s]
  double allocator_ops_per_s = 0;  // allocator operations answered since the last sample [ops/s]
  uint64_t faults = 0;             // faults injected since the last sample
  int64_t node_rss_bytes = 0;      // the node process's resident set [bytes]
};

struct ChaosReport {
  uint64_t seed = 0;
  uint32_t workers = 0;
  double wall_s = 0;
  std::array<uint64_t, kFaultKindCount> scheduled{};
  std::array<uint64_t, kFaultKindCount> injected{};
  // A worker fault whose slot had no running worker at that moment (it was
  // being replaced, or the node was restarting).
  std::array<uint64_t, kFaultKindCount> skipped{};
  uint64_t node_restarts = 0;
  uint64_t workers_started = 0;
  uint64_t workers_completed = 0;    // ran to the end of their duration, exactly
  uint64_t workers_unreachable = 0;  // exited 2, node_unreachable: could not connect (nothing admitted)
  uint64_t requests = 0;             // completed by workers that reported a summary
  uint64_t hit_tokens = 0, prompt_tokens = 0, reused_rows_checked = 0, reuse_mismatches = 0;
  // Transactions a fired fault point ended that the workers went on without
  // (an allocation retried later, a request served without reuse): each is
  // an interrupted request accounted for, never a silent loss.
  uint64_t faults_absorbed = 0;
  // namespace_update faults carried out by the node, purges among them that
  // resumed one a fault point had left open, and refusals the node's state
  // explained (an open purge, a fault point inside the purge).
  uint64_t namespace_invalidations = 0, namespace_purges = 0, namespace_purges_resumed = 0;
  uint64_t namespace_updates_refused = 0;
  // What the workers saw of them: refusals for a stale or closed generation,
  // reauthorizations, reuse receipts a purge revoked.
  uint64_t stale_generation_refusals = 0, reauthorizations = 0, receipts_revoked = 0;
  uint64_t hits_withdrawn = 0;          // allocations refused because a revoked receipt's blocks were gone
  uint64_t validations = 0;             // node-wide validate() passes read
  LatencySummary node_death_detection;  // node SIGKILL -> each running worker exited with node_lost
  LatencySummary node_restart;          // node SIGKILL -> the new node serves the descriptor
  // worker_hang: SIGSTOP -> the node's log says it reclaimed the session
  // (about [node] connection_timeout_ms; scanned every 10 ms).
  LatencySummary hung_worker_reclaim;
  // Owner fault points armed through the admin route, and fired (the
  // transaction that reached one rolled back to its predecessor, 0x04F), by
  // qualified name (<owner>.<point>).
  std::map<std::string, uint64_t> fault_points_armed, fault_points_fired;
  // The live-node fuzzer (hostile_client faults): its runs and what the
  // node answered. Every request must get its receipt or a typed error, and
  // every bad frame a closed connection; `unexpected` counts the rest.
  struct HostileTotals {
    uint64_t runs = 0, could_not_connect = 0;
    uint64_t requests = 0, requests_channel = 0, mutated = 0;
    uint64_t receipts = 0, typed_errors = 0, frames_refused = 0, unexpected = 0;
  };
  HostileTotals hostile;
  // transport faults (tools/chaos/channel_fault_proxy.hpp): done per kind
  // (a worker that exited before its next frame got none), and the workers
  // that a fault stopped with a typed error (rpc_timeout, rpc_failed,
  // node_lost), every request they had not finished reported failed.
  std::array<uint64_t, kTransportFaultKindCount> transport_applied{};
  uint64_t transport_interrupted = 0;
  // Engine slots (engine_slots): processes that ended their share, and what
  // their results say. Every finished share must be whole and exact.
  struct EngineTotals {
    uint64_t finished = 0, requests = 0, requests_verified = 0, served_privately = 0;
    uint64_t sessions_lost = 0, reconnects = 0, token_mismatches = 0, row_mismatches = 0, operation_errors = 0;
  };
  EngineTotals engine;
  std::vector<TimelinePoint> timeline;
  // The node's resident set: first and last sample, and its least-squares
  // slope over the samples after the first fifth of the campaign (warm-up)
  // [MiB/min]; a soak run (no faults, one node life) wants it flat.
  double node_rss_first_mib = 0, node_rss_last_mib = 0, node_rss_slope_mib_per_min = 0;
  // Receipt latency as the workers saw it: the median and the largest of the
  // workers' own p99s, and the largest single call [us].
  double worker_call_p99_median_us = 0, worker_call_p99_max_us = 0, worker_call_max_us = 0;
  std::vector<Violation> violations;
  // The no-fault run that followed ([chaos] baseline_s > 0): the same node
  // config, workers and seed. Throughput under faults is read against it.
  struct Baseline {
    double wall_s = 0;
    uint64_t requests = 0;  // completed by its workers
    double allocator_ops_per_s_median = 0;
  };
  std::optional<Baseline> baseline;
};

// The timeline as two SVG line charts over time, embedded by report.md:
// throughput.svg (allocator operations per second) and faults.svg (faults
// injected per second).
std::string chaos_throughput_svg(const ChaosReport& report);
std::string chaos_faults_svg(const ChaosReport& report);

Result<ChaosReport> run_chaos_campaign(const ChaosOptions& options);

// The median of the timeline's allocator operations per second.
double median_allocator_ops_per_s(const ChaosReport& report);

std::string chaos_report_text(const ChaosReport& report);
std::string chaos_report_json(const ChaosReport& report);
std::string chaos_report_markdown(const ChaosReport& report, const ChaosConfig& config);

}  // namespace kvrt::chaos
