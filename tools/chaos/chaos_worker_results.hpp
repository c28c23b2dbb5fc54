#pragma once
// What a campaign's ended process reported, added to the campaign's totals:
// a `kvrt worker` summary line and an engine slot's result (kvrt run-worker
// --result). Pure functions of the report and the process's own figures, so
// that how a result counts and which results are violations is one place,
// apart from the process handling around it (chaos_worker_slots.cpp). Each
// answers the violations it found, as sentences naming the process; the
// campaign stamps them with the time and the last fault.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_worker.hpp"
#include "tools/chaos/chaos_campaign.hpp"

namespace kvrt::chaos {

// A `kvrt worker --json` summary: requests, tokens, absorbed faults and the
// namespace-update counters add up; its call latency joins `call_p99_us`.
// Violations: reused rows that were not exact, and more hits withdrawn than
// receipts revoked for a worker that ran to its end (a hit is withdrawn
// only when a purge revoked its receipt, which the receipt's release says).
std::vector<std::string> add_worker_summary(ChaosReport& report, std::vector<double>& call_p99_us,
                                            const nlohmann::json& summary, const std::string& name);

// An engine slot that exited 0: its totals add up. Violations: requests it
// did not finish, token or row mismatches, and requests neither verified
// nor served privately.
std::vector<std::string> add_engine_result(ChaosReport& report, const EngineResult& r, const std::string& name);

// How a `kvrt worker` process ended, judged from the fault done to it.
enum class WorkerEnding : uint8_t {
  expected,               // killed, terminated or stopped as its fault says
  completed,              // ran to its end (status 0)
  node_lost,              // status 1 on node_lost after its node died: the campaign's detection figure
  transport_interrupted,  // a transport fault ended it with a typed error
  unreachable,            // status 2: it never admitted a request (could not connect, or its node died first)
  violation,              // none of the above
};
struct WorkerVerdict {
  WorkerEnding ending = WorkerEnding::expected;
  std::string violation;  // set for a violation, and for a completed worker without its summary line
};
// `fault` the last one done to the process (none: none), `status` as the
// campaign reaped it (128 + signal for a signal), `output`
// the worker's log, `has_summary` whether it holds the --json summary line,
// `node_died` whether its node died while it ran. `name` begins each
// violation.
WorkerVerdict judge_worker_exit(std::optional<FaultKind> fault, int status, const std::string& output, bool has_summary,
                                bool node_died, const std::string& name);

// How an engine slot's process ended. An engine rides out its node's death
// (privately, then on the next node), so it ends by its fault (killed: any
// of SIGKILL, SIGTERM or 0 is fine) or by finishing its share (status 0:
// `completed`, whose result the caller then reads, add_engine_result).
// Status 2 is `unreachable` when it never admitted a request: it could not
// connect (node_unreachable), or its node died while it was binding to it
// (node_lost, said "before admitting any request", with `node_died`).
WorkerVerdict judge_engine_exit(std::optional<FaultKind> fault, int status, const std::string& output, bool node_died,
                                const std::string& name);

// The last `bytes` of a log, for a violation's message.
std::string tail_of(const std::string& text, size_t bytes = 600);

}  // namespace kvrt::chaos
