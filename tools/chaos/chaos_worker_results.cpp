#include "tools/chaos/chaos_worker_results.hpp"

#include <signal.h>

#include <algorithm>

namespace kvrt::chaos {

std::vector<std::string> add_worker_summary(ChaosReport& report, std::vector<double>& call_p99_us,
                                            const nlohmann::json& summary, const std::string& name) {
  std::vector<std::string> violations;
  auto count = [&](const char* key) { return summary.value(key, uint64_t{0}); };
  report.requests += count("requests");
  report.hit_tokens += count("hit_tokens");
  report.prompt_tokens += count("prompt_tokens");
  report.reused_rows_checked += count("reused_rows_checked");
  report.faults_absorbed += count("faults_absorbed");
  report.stale_generation_refusals += count("stale_generation_refusals");
  report.reauthorizations += count("reauthorizations");
  report.receipts_revoked += count("receipts_revoked");
  report.hits_withdrawn += count("hits_withdrawn");
  if (count("round_trips") > 0) {
    call_p99_us.push_back(summary.value("call_p99_us", 0.0));
    report.worker_call_max_us = std::max(report.worker_call_max_us, summary.value("call_max_us", 0.0));
  }
  const uint64_t withdrawn = count("hits_withdrawn"), revoked = count("receipts_revoked");
  if (withdrawn > revoked && summary.value("stopped_by", std::string()).empty())
    violations.push_back(name + ": " + std::to_string(withdrawn) + " hits withdrawn but only " +
                         std::to_string(revoked) + " receipts revoked");
  const uint64_t mismatches = count("reuse_mismatches");
  report.reuse_mismatches += mismatches;
  if (mismatches > 0) violations.push_back(name + ": " + std::to_string(mismatches) + " reused rows not exact");
  return violations;
}

std::vector<std::string> add_engine_result(ChaosReport& report, const EngineResult& r, const std::string& name) {
  std::vector<std::string> violations;
  ChaosReport::EngineTotals& t = report.engine;
  ++t.finished;
  t.requests += r.requests;
  t.requests_verified += r.requests_verified;
  t.served_privately += r.requests_served_privately;
  t.sessions_lost += r.sessions_lost;
  t.reconnects += r.reconnects;
  t.token_mismatches += r.token_mismatches;
  t.row_mismatches += r.row_mismatches;
  t.operation_errors += r.operation_errors;
  report.faults_absorbed += r.faults_absorbed;
  report.stale_generation_refusals += r.stale_generation_refusals + r.namespace_closed_refusals;
  report.reauthorizations += r.reauthorizations;
  report.receipts_revoked += r.receipts_revoked;
  report.hits_withdrawn += r.hits_withdrawn;
  report.requests += r.requests;
  if (r.requests != r.requests_total)
    violations.push_back(name + " finished " + std::to_string(r.requests) + " of its " +
                         std::to_string(r.requests_total) + " requests");
  if (r.token_mismatches + r.row_mismatches > 0)
    violations.push_back(name + ": " + std::to_string(r.token_mismatches) + " token and " +
                         std::to_string(r.row_mismatches) + " row mismatches: " + r.first_mismatch);
  if (r.requests_verified + r.requests_served_privately != r.requests)
    violations.push_back(name + ": " + std::to_string(r.requests - r.requests_verified - r.requests_served_privately) +
                         " requests neither verified nor served privately");
  return violations;
}

std::string tail_of(const std::string& text, size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

WorkerVerdict judge_worker_exit(std::optional<FaultKind> fault, int status, const std::string& output, bool has_summary,
                                bool node_died, const std::string& name) {
  auto contains = [&](const char* what) { return output.find(what) != std::string::npos; };
  auto violation = [&](const std::string& what) {
    return WorkerVerdict{WorkerEnding::violation, name + " " + what + ": " + tail_of(output)};
  };
  const bool lost = contains("node_lost"), ended = contains("session_ended");
  const WorkerVerdict completed{WorkerEnding::completed, has_summary ? "" : name + " exited 0 without its summary"};
  if (fault == FaultKind::worker_sigkill || fault == FaultKind::worker_hang || fault == FaultKind::worker_sigterm) {
    const bool term = fault == FaultKind::worker_sigterm;
    if (status == 128 + (term ? SIGTERM : SIGKILL) || status == 0) return {};
    // The signal may have found the process already exited and not yet
    // reaped (a worker that could not reach a node being restarted exits at
    // once): its own ending stands, judged as with no fault done to it.
    const WorkerVerdict own = judge_worker_exit(std::nullopt, status, output, has_summary, node_died, name);
    if (own.ending != WorkerEnding::violation) return own;
    return violation(std::string(term ? "got SIGTERM" : "was killed") + " but exited with status " +
                     std::to_string(status));
  }
  if (fault == FaultKind::transport) {
    if (status == 1 && node_died && lost) return {WorkerEnding::node_lost, ""};  // its node died first
    // A fault the worker rode out (a short delay) ends normally; one that
    // broke its channel or cut its session ends with that typed error, and
    // the worker reports it rather than success. Status 2: it failed before
    // admitting any request (the hello, grant or pools), the same way.
    const bool typed = lost || ended || contains("rpc_timeout") || contains("rpc_failed");
    if ((status == 1 || status == 2) && typed) return {WorkerEnding::transport_interrupted, ""};
    if (status == 0) return completed;
    // The fault is armed on the session channel; a worker whose node was
    // killed before it connected (exit 2, node_unreachable, on the
    // middleman) never met it: its own ending stands.
    const WorkerVerdict own = judge_worker_exit(std::nullopt, status, output, has_summary, node_died, name);
    if (own.ending != WorkerEnding::violation) return own;
    return violation("had a transport fault and exited with status " + std::to_string(status));
  }
  if (status == 0) return completed;
  // Status 1 is expected only for a lost session: its node died, or (a
  // stopped worker) the node took it for hung and reclaimed it.
  if (status == 1 && node_died && lost) return {WorkerEnding::node_lost, ""};
  // Status 2, node_unreachable: the worker could not connect (its node had
  // just died, or a loaded node missed the connection timeout). Nothing was
  // admitted, and the failure is typed and reported: counted, not a
  // violation. Status 2 with node_lost: its node died while it was still
  // connecting (hello, grant, pools), before it admitted anything: the same.
  if (status == 2 && (contains("node_unreachable") || (node_died && lost))) return {WorkerEnding::unreachable, ""};
  if (status == 1 && fault == FaultKind::worker_sigstop && (ended || lost)) return {};
  return violation("exited with status " + std::to_string(status) + (node_died ? " after its node died" : ""));
}

WorkerVerdict judge_engine_exit(std::optional<FaultKind> fault, int status, const std::string& output, bool node_died,
                                const std::string& name) {
  auto contains = [&](std::string_view what) { return output.find(what) != std::string::npos; };
  if (fault == FaultKind::worker_sigkill || fault == FaultKind::worker_hang || fault == FaultKind::worker_sigterm) {
    if (status == 128 + SIGKILL || status == 128 + SIGTERM || status == 0) return {};
    // The signal may have found it already exited: its own ending stands.
    const WorkerVerdict own = judge_engine_exit(std::nullopt, status, output, node_died, name);
    if (own.ending != WorkerEnding::violation) return own;
    return {WorkerEnding::violation,
            name + " was killed but exited with status " + std::to_string(status) + ": " + tail_of(output)};
  }
  if (status == 0) return {WorkerEnding::completed, ""};
  if (status == 2 &&
      (contains("node_unreachable") || (node_died && contains("node_lost") && contains(kBeforeAdmission))))
    return {WorkerEnding::unreachable, ""};
  return {WorkerEnding::violation, name + " exited with status " + std::to_string(status) +
                                       (node_died ? " after its node died" : "") + ": " + tail_of(output)};
}

}  // namespace kvrt::chaos
