#include "bench/bench_report.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace kvrt::bench {

std::optional<double> BenchRow::ratio() const {
  if (!baseline || value <= 0 || *baseline <= 0) return std::nullopt;
  return better == Better::lower ? *baseline / value : value / *baseline;
}

std::optional<bool> BenchRow::meets() const {
  if (!target) return std::nullopt;
  return target->better == Better::lower ? value <= target->bound : value >= target->bound;
}

std::string BenchRow::target_text() const {
  if (!target) return "";
  std::ostringstream s;
  s << (target->better == Better::lower ? "<= " : ">= ") << target->bound << " " << unit;
  return s.str();
}

MachineInfo machine_info() {
  MachineInfo m;
  m.cpus = std::thread::hardware_concurrency();
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      m.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
#if defined(__clang__)
  m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  m.compiler = "g++ " __VERSION__;
#endif
#ifdef NDEBUG
  m.build = "Release";
#else
  m.build = "Debug";
#endif
  return m;
}

std::string BenchReport::to_json() const {
  const MachineInfo m = machine_info();
  nlohmann::json rows_json = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j{{"name", r.name}, {"value", r.value}, {"unit", r.unit}};
    if (r.baseline_name) j["baseline_name"] = *r.baseline_name;
    if (r.baseline) j["baseline"] = *r.baseline;
    if (auto q = r.ratio()) j["ratio"] = *q;
    if (r.target) j["target"] = r.target_text();
    if (auto ok = r.meets()) j["meets"] = *ok;
    if (!r.note.empty()) j["note"] = r.note;
    rows_json.push_back(j);
  }
  nlohmann::json out{
      {"bench", bench},
      {"quick", quick},
      {"machine", {{"cpus", m.cpus}, {"cpu_model", m.cpu_model}, {"compiler", m.compiler}, {"build", m.build}}},
      {"rows", rows_json}};
  if (!notes.empty()) out["notes"] = notes;
  return out.dump(2);
}

std::string BenchReport::to_table() const {
  const MachineInfo m = machine_info();
  std::ostringstream s;
  char buf[512];
  s << "kvrt bench " << bench << (quick ? " (quick)" : "") << " - medians over repeated trials\n"
    << "machine: " << m.cpus << " cpus, " << m.cpu_model << ", " << m.compiler << ", " << m.build << "\n\n";
  std::snprintf(buf, sizeof buf, "%-26s %14s %-9s %-14s %12s %8s  %-18s %s\n", "row", "value", "unit", "baseline",
                "baseline", "ratio", "target", "meets");
  s << buf;
  for (const auto& r : rows) {
    const auto q = r.ratio();
    const auto ok = r.meets();
    std::snprintf(buf, sizeof buf, "%-26s %14.2f %-9s %-14s %12s %8s  %-18s %s\n", r.name.c_str(), r.value,
                  r.unit.c_str(), r.baseline_name.value_or("").c_str(),
                  r.baseline ? std::to_string(*r.baseline).substr(0, 10).c_str() : "",
                  q ? (std::to_string(*q).substr(0, 6) + "x").c_str() : "", r.target_text().c_str(),
                  ok ? (*ok ? "yes" : "NO") : "");
    s << buf;
    if (!r.note.empty()) s << "    " << r.note << "\n";
  }
  for (const auto& n : notes) s << "\nnote: " << n;
  if (!notes.empty()) s << "\n";
  return s.str();
}

double median_of(int trials, const std::function<double()>& fn) {
  std::vector<double> v;
  for (int i = 0; i < trials; ++i) v.push_back(fn());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace kvrt::bench
