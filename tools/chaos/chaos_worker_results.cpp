#include "tools/chaos/chaos_worker_results.hpp"

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

}  // namespace kvrt::chaos
