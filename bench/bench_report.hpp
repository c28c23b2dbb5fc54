#pragma once
// Benchmark reporting as docs/benchmarks.md prescribes: a human table, or one
// JSON object with a machine line and rows {name, value, unit, baseline_name,
// baseline, ratio, target, meets}. `ratio` is always "how many times better
// kvrt is" (> 1 is better); `meets` is computed from the target.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvrt::bench {

// Whether smaller or larger values are better for a row.
enum class Better { lower, higher };

struct Target {
  double bound = 0;
  Better better = Better::lower;  // lower: value <= bound; higher: value >= bound
};

struct BenchRow {
  std::string name;
  double value = 0;
  std::string unit;
  Better better = Better::lower;
  std::optional<std::string> baseline_name;
  std::optional<double> baseline;
  std::optional<Target> target;
  std::string note;

  std::optional<double> ratio() const;  // baseline/value (lower better) or value/baseline
  std::optional<bool> meets() const;
  std::string target_text() const;  // "<= 25 ns/op"
};

struct BenchReport {
  std::string bench;
  bool quick = false;
  std::vector<BenchRow> rows;
  std::vector<std::string> notes;

  std::string to_json() const;   // one JSON object
  std::string to_table() const;  // human table
};

struct MachineInfo {
  unsigned cpus = 0;
  std::string cpu_model;
  std::string compiler;
  std::string build;
};
MachineInfo machine_info();

// Median of `trials` runs of `fn`, each returning a measurement.
double median_of(int trials, const std::function<double()>& fn);

// Monotonic nanoseconds.
uint64_t now_ns();

// Keeps a value alive against dead-code elimination.
template <class T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace kvrt::bench
