// The campaign's report: text for the terminal, JSON (`--json`,
// report.json) and Markdown (report.md in --out).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tools/chaos/chaos_campaign.hpp"
#include "tools/report/svg_plot.hpp"

namespace kvrt::chaos {

namespace {

nlohmann::ordered_json latency_json(const LatencySummary& s) {
  return {{"count", s.count}, {"p50_ms", s.p50_ms}, {"p99_ms", s.p99_ms}, {"max_ms", s.max_ms}};
}

std::string latency_text(const LatencySummary& s) {
  if (s.count == 0) return "none measured";
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << "p50 " << s.p50_ms << " ms, p99 " << s.p99_ms << " ms, max " << s.max_ms << " ms (" << s.count
      << ")";
  return out.str();
}

// How often an armed point fired (0: armed, never reached often enough).
uint64_t fired_of(const ChaosReport& r, const std::string& name) {
  const auto fired = r.fault_points_fired.find(name);
  return fired == r.fault_points_fired.end() ? 0 : fired->second;
}

std::string engine_text(const ChaosReport& r) {
  const ChaosReport::EngineTotals& e = r.engine;
  return std::to_string(e.finished) + " shares finished, " + std::to_string(e.requests) + " requests (" +
         std::to_string(e.requests_verified) + " verified bitwise against a no-reuse replay, " +
         std::to_string(e.served_privately) + " served privately after " + std::to_string(e.sessions_lost) +
         " lost sessions, " + std::to_string(e.reconnects) + " reconnects), " + std::to_string(e.token_mismatches) +
         " token and " + std::to_string(e.row_mismatches) + " row mismatches, " + std::to_string(e.operation_errors) +
         " operation errors";
}

// "delay 3, duplicate 1, ..." (kinds never done left out; "none").
std::string transport_text(const ChaosReport& r) {
  std::string out;
  for (size_t k = 0; k < kTransportFaultKindCount; ++k)
    if (r.transport_applied[k] > 0)
      out += (out.empty() ? "" : ", ") + std::string(to_string(static_cast<TransportFaultKind>(k))) + " " +
             std::to_string(r.transport_applied[k]);
  return out.empty() ? "none" : out;
}

nlohmann::ordered_json transport_json(const ChaosReport& r) {
  nlohmann::ordered_json applied = nlohmann::ordered_json::object();
  for (size_t k = 0; k < kTransportFaultKindCount; ++k)
    applied[std::string(to_string(static_cast<TransportFaultKind>(k)))] = r.transport_applied[k];
  return {{"applied", applied}, {"workers_interrupted", r.transport_interrupted}};
}

nlohmann::ordered_json fault_points_json(const ChaosReport& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, armed] : r.fault_points_armed) out[name] = {{"armed", armed}, {"fired", fired_of(r, name)}};
  return out;
}

uint64_t worker_kills(const ChaosReport& r) {
  return r.injected[static_cast<size_t>(FaultKind::worker_sigkill)] +
         r.injected[static_cast<size_t>(FaultKind::worker_sigstop)] +
         r.injected[static_cast<size_t>(FaultKind::worker_hang)];
}

}  // namespace

double median_allocator_ops_per_s(const ChaosReport& r) {
  std::vector<double> v;
  for (const TimelinePoint& p : r.timeline) v.push_back(p.allocator_ops_per_s);
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {
double per_s(uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; }
// Throughput under faults over throughput without [1].
double ratio(double faulted, double clean) { return clean > 0 ? faulted / clean : 0.0; }
}  // namespace

std::string chaos_report_json(const ChaosReport& r) {
  nlohmann::ordered_json faults = nlohmann::ordered_json::object();
  for (size_t k = 0; k < kFaultKindCount; ++k)
    faults[std::string(to_string(static_cast<FaultKind>(k)))] = {
        {"scheduled", r.scheduled[k]}, {"injected", r.injected[k]}, {"skipped", r.skipped[k]}};
  nlohmann::ordered_json violations = nlohmann::ordered_json::array();
  for (const Violation& v : r.violations)
    violations.push_back({{"at_ms", v.at_ms}, {"what", v.what}, {"preceding_fault", v.preceding_fault}});
  nlohmann::ordered_json j{{"seed", r.seed},
                           {"workers", r.workers},
                           {"wall_s", r.wall_s},
                           {"faults", faults},
                           {"worker_kills", worker_kills(r)},
                           {"node_restarts", r.node_restarts},
                           {"workers_started", r.workers_started},
                           {"workers_completed", r.workers_completed},
                           {"workers_unreachable", r.workers_unreachable},
                           {"requests", r.requests},
                           {"requests_per_s", r.wall_s > 0 ? r.requests / r.wall_s : 0.0},
                           {"hit_tokens", r.hit_tokens},
                           {"prompt_tokens", r.prompt_tokens},
                           {"reused_rows_checked", r.reused_rows_checked},
                           {"reuse_mismatches", r.reuse_mismatches},
                           {"faults_absorbed", r.faults_absorbed},
                           {"namespace_updates",
                            {{"invalidations", r.namespace_invalidations},
                             {"purges", r.namespace_purges},
                             {"purges_resumed", r.namespace_purges_resumed},
                             {"refused", r.namespace_updates_refused},
                             {"stale_generation_refusals", r.stale_generation_refusals},
                             {"reauthorizations", r.reauthorizations},
                             {"receipts_revoked", r.receipts_revoked},
                             {"hits_withdrawn", r.hits_withdrawn}}},
                           {"validations", r.validations},
                           {"node_death_detection", latency_json(r.node_death_detection)},
                           {"node_restart", latency_json(r.node_restart)},
                           {"hung_worker_reclaim", latency_json(r.hung_worker_reclaim)},
                           {"fault_points", fault_points_json(r)},
                           {"hostile_client",
                            {{"runs", r.hostile.runs},
                             {"could_not_connect", r.hostile.could_not_connect},
                             {"requests", r.hostile.requests},
                             {"requests_on_channel", r.hostile.requests_channel},
                             {"mutated", r.hostile.mutated},
                             {"receipts", r.hostile.receipts},
                             {"typed_errors", r.hostile.typed_errors},
                             {"frames_refused", r.hostile.frames_refused},
                             {"unexpected", r.hostile.unexpected}}},
                           {"transport", transport_json(r)},
                           {"engine",
                            {{"finished", r.engine.finished},
                             {"requests", r.engine.requests},
                             {"requests_verified", r.engine.requests_verified},
                             {"served_privately", r.engine.served_privately},
                             {"sessions_lost", r.engine.sessions_lost},
                             {"reconnects", r.engine.reconnects},
                             {"token_mismatches", r.engine.token_mismatches},
                             {"row_mismatches", r.engine.row_mismatches},
                             {"operation_errors", r.engine.operation_errors}}},
                           {"node_rss_first_mib", r.node_rss_first_mib},
                           {"node_rss_last_mib", r.node_rss_last_mib},
                           {"node_rss_slope_mib_per_min", r.node_rss_slope_mib_per_min},
                           {"worker_call_p99_median_us", r.worker_call_p99_median_us},
                           {"worker_call_p99_max_us", r.worker_call_p99_max_us},
                           {"worker_call_max_us", r.worker_call_max_us},
                           {"violations", violations}};
  j["allocator_ops_per_s_median"] = median_allocator_ops_per_s(r);
  if (r.baseline) {
    const double clean_rps = per_s(r.baseline->requests, r.baseline->wall_s);
    j["baseline"] = {
        {"wall_s", r.baseline->wall_s},
        {"requests", r.baseline->requests},
        {"requests_per_s", clean_rps},
        {"allocator_ops_per_s_median", r.baseline->allocator_ops_per_s_median},
        {"requests_per_s_ratio", ratio(per_s(r.requests, r.wall_s), clean_rps)},
        {"allocator_ops_per_s_ratio", ratio(median_allocator_ops_per_s(r), r.baseline->allocator_ops_per_s_median)}};
  }
  return j.dump(2);
}

std::string chaos_report_text(const ChaosReport& r) {
  std::ostringstream out;
  out << "kvrt chaos: seed " << r.seed << ", " << r.workers << " worker slots, " << r.wall_s << " s\n";
  out << "  faults (injected / scheduled, skipped when the slot had no running worker):\n";
  for (size_t k = 0; k < kFaultKindCount; ++k)
    out << "    " << to_string(static_cast<FaultKind>(k)) << ": " << r.injected[k] << " / " << r.scheduled[k]
        << (r.skipped[k] ? " (" + std::to_string(r.skipped[k]) + " skipped)" : "") << "\n";
  out << "  worker kills (SIGKILL + SIGSTOP): " << worker_kills(r) << ", node restarts: " << r.node_restarts << "\n";
  out << "  workers: " << r.workers_started << " started, " << r.workers_completed << " ran to their end exactly, "
      << r.workers_unreachable << " could not connect (node_unreachable)\n";
  out << "  requests: " << r.requests << " completed, " << r.hit_tokens << "/" << r.prompt_tokens
      << " prompt tokens reused, " << r.reused_rows_checked << " reused rows checked, " << r.reuse_mismatches
      << " mismatches\n";
  out << "  transactions ended by fault points that workers went on without: " << r.faults_absorbed << "\n";
  if (r.namespace_invalidations + r.namespace_purges + r.namespace_updates_refused > 0)
    out << "  namespace updates: " << r.namespace_invalidations << " invalidations, " << r.namespace_purges
        << " purges (" << r.namespace_purges_resumed << " resuming an open one), " << r.namespace_updates_refused
        << " refused by an open purge or a fault point; workers: " << r.stale_generation_refusals
        << " stale-generation refusals, " << r.reauthorizations << " reauthorizations, " << r.receipts_revoked
        << " receipts revoked (" << r.hits_withdrawn << " of their hits gone before the allocation)\n";
  if (r.baseline) {
    const double clean_rps = per_s(r.baseline->requests, r.baseline->wall_s);
    out << "  throughput: " << per_s(r.requests, r.wall_s) << " requests/s under faults, " << clean_rps << " without ("
        << r.baseline->wall_s << " s baseline), ratio " << ratio(per_s(r.requests, r.wall_s), clean_rps)
        << "; allocator ops/s median " << median_allocator_ops_per_s(r) << " vs "
        << r.baseline->allocator_ops_per_s_median << "\n";
  }
  if (r.hostile.runs > 0)
    out << "  hostile client: " << r.hostile.runs << " runs, " << r.hostile.requests << " requests ("
        << r.hostile.mutated << " mutated, " << r.hostile.requests_channel << " on the channel): " << r.hostile.receipts
        << " receipts, " << r.hostile.typed_errors << " typed errors, " << r.hostile.frames_refused
        << " bad frames refused, " << r.hostile.unexpected << " unexpected\n";
  if (r.injected[static_cast<size_t>(FaultKind::transport)] > 0)
    out << "  transport faults done: " << transport_text(r)
        << "; workers stopped by one with a typed error: " << r.transport_interrupted << "\n";
  if (r.engine.finished > 0) out << "  engine workers: " << engine_text(r) << "\n";
  out << "  node validate() passes: " << r.validations << "\n";
  out << "  node RSS: " << r.node_rss_first_mib << " MiB at the first sample, " << r.node_rss_last_mib
      << " MiB at the last; slope after warm-up " << r.node_rss_slope_mib_per_min << " MiB/min\n";
  out << "  receipt latency seen by workers: p99 " << r.worker_call_p99_median_us << " us (median worker), "
      << r.worker_call_p99_max_us << " us (worst worker), max " << r.worker_call_max_us << " us\n";
  out << "  node death detected by workers: " << latency_text(r.node_death_detection) << "\n";
  out << "  node kill to new node serving: " << latency_text(r.node_restart) << "\n";
  out << "  hung worker to its session reclaimed: " << latency_text(r.hung_worker_reclaim) << "\n";
  for (const auto& [name, armed] : r.fault_points_armed)
    out << "  fault point " << name << ": armed " << armed << ", fired " << fired_of(r, name) << "\n";
  out << "  violations: " << r.violations.size() << "\n";
  for (const Violation& v : r.violations)
    out << "    at " << v.at_ms << " ms (after " << v.preceding_fault << "): " << v.what << "\n";
  if (!r.violations.empty()) out << "  replay: kvrt chaos --seed " << r.seed << " with the same config\n";
  return out.str();
}

std::string chaos_report_markdown(const ChaosReport& r, const ChaosConfig& c) {
  std::ostringstream out;
  out << "# kvrt chaos report\n\n";
  out << "Config `" << c.config_path << "`, seed " << r.seed << ", " << c.duration_s << " s of faults over "
      << r.workers << " worker slots (each worker runs " << c.worker_duration_s << " s), node config `"
      << c.node_config_path << "`.\n\n";
  out << "| fault | rate [/min] | scheduled | injected | skipped |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (size_t k = 0; k < kFaultKindCount; ++k)
    out << "| " << to_string(static_cast<FaultKind>(k)) << " | " << c.per_minute[k] << " | " << r.scheduled[k] << " | "
        << r.injected[k] << " | " << r.skipped[k] << " |\n";
  out << "\n| measure | value |\n| --- | --- |\n";
  out << "| wall time | " << r.wall_s << " s |\n";
  out << "| node restarts | " << r.node_restarts << " |\n";
  out << "| workers started / ran to their end / could not connect | " << r.workers_started << " / "
      << r.workers_completed << " / " << r.workers_unreachable << " |\n";
  out << "| requests completed | " << r.requests << " (" << (r.wall_s > 0 ? r.requests / r.wall_s : 0.0) << " /s) |\n";
  out << "| reused rows checked / mismatches | " << r.reused_rows_checked << " / " << r.reuse_mismatches << " |\n";
  out << "| transactions ended by fault points, absorbed by workers | " << r.faults_absorbed << " |\n";
  if (r.baseline) {
    const double clean_rps = per_s(r.baseline->requests, r.baseline->wall_s);
    out << "| requests/s under faults / without (ratio) | " << per_s(r.requests, r.wall_s) << " / " << clean_rps << " ("
        << ratio(per_s(r.requests, r.wall_s), clean_rps) << ") |\n";
    out << "| allocator ops/s median under faults / without (ratio) | " << median_allocator_ops_per_s(r) << " / "
        << r.baseline->allocator_ops_per_s_median << " ("
        << ratio(median_allocator_ops_per_s(r), r.baseline->allocator_ops_per_s_median) << ") |\n";
  }
  out << "| hostile client: runs / requests (mutated) / receipts / typed errors / bad frames refused / unexpected | "
      << r.hostile.runs << " / " << r.hostile.requests << " (" << r.hostile.mutated << ") / " << r.hostile.receipts
      << " / " << r.hostile.typed_errors << " / " << r.hostile.frames_refused << " / " << r.hostile.unexpected
      << " |\n";
  out << "| transport faults done / workers stopped by one with a typed error | " << transport_text(r) << " / "
      << r.transport_interrupted << " |\n";
  if (r.engine.finished > 0) out << "| engine workers (kvrt run-worker) | " << engine_text(r) << " |\n";
  out << "| node validate() passes | " << r.validations << " |\n";
  out << "| node RSS first / last / slope after warm-up | " << r.node_rss_first_mib << " MiB / " << r.node_rss_last_mib
      << " MiB / " << r.node_rss_slope_mib_per_min << " MiB/min |\n";
  out << "| receipt latency p99, median worker / worst worker / max | " << r.worker_call_p99_median_us << " / "
      << r.worker_call_p99_max_us << " / " << r.worker_call_max_us << " us |\n";
  out << "| node death detected by workers | " << latency_text(r.node_death_detection) << " |\n";
  out << "| node kill to new node serving | " << latency_text(r.node_restart) << " |\n";
  out << "| hung worker (SIGSTOP) to its session reclaimed | " << latency_text(r.hung_worker_reclaim) << " |\n";
  out << "| violations | " << r.violations.size() << " |\n";
  if (!r.fault_points_armed.empty()) {
    out << "\n| fault point | armed | fired |\n| --- | ---: | ---: |\n";
    for (const auto& [name, armed] : r.fault_points_armed)
      out << "| " << name << " | " << armed << " | " << fired_of(r, name) << " |\n";
  }
  out << "\n![allocator operations per second](throughput.svg)\n\n![faults per second](faults.svg)\n";
  if (!r.violations.empty()) {
    out << "\n## Violations\n\n";
    for (const Violation& v : r.violations)
      out << "- at " << v.at_ms << " ms, after " << v.preceding_fault << ": " << v.what << "\n";
    out << "\nReplay: `kvrt chaos --config " << c.config_path << " --seed " << r.seed << "`.\n";
  }
  return out.str();
}

namespace {

std::string timeline_chart(const ChaosReport& r, const std::string& title, const std::string& name,
                           const std::string& unit, double (*value)(const TimelinePoint&, double)) {
  report::svg::LineChart chart;
  chart.title = title;
  chart.x_axis = {"time since the campaign started", "s"};
  chart.y_axis = {name, unit};
  report::svg::Series series{name, {}};
  double last_t = 0;
  for (const TimelinePoint& p : r.timeline) {
    series.points.emplace_back(p.t_s, value(p, p.t_s - last_t));
    last_t = p.t_s;
  }
  chart.series.push_back(std::move(series));
  return report::svg::render_line_chart(chart);
}

}  // namespace

std::string chaos_throughput_svg(const ChaosReport& r) {
  return timeline_chart(r, "Throughput under faults", "allocator operations", "ops/s",
                        [](const TimelinePoint& p, double) { return p.allocator_ops_per_s; });
}

std::string chaos_faults_svg(const ChaosReport& r) {
  return timeline_chart(r, "Faults injected", "faults", "1/s", [](const TimelinePoint& p, double dt) {
    return dt > 0 ? static_cast<double>(p.faults) / dt : 0.0;
  });
}

}  // namespace kvrt::chaos
