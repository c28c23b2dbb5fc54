#pragma once
// Figures derived from a RunReport that more than one renderer prints (the
// terminal summary, --json, report.md), computed once here so the three can
// never disagree. Ratios follow docs/benchmarks.md: "how many times better",
// > 1 is better, and an undefined ratio is absent (printed "n/a", JSON null)
// rather than a division by zero (spec 0x02F, not_applicable).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/report/run_report.hpp"

namespace kvrt::report {

// reused / (reused + computed) over prompt rows; absent when no prompt row was needed.
std::optional<double> reuse_ratio(uint64_t reused_rows, uint64_t computed_rows);
// baseline / value for a figure where less is better (rows, bytes, seconds):
// 2.0 means half the baseline's. Absent when value is not a positive finite
// number or the baseline is not finite.
std::optional<double> saving_ratio(double baseline, double value);

// Reused rows the report does not attribute to either index:
// prefill_rows_reused - reused_by_hash_chain - reused_by_radix, 0 if negative.
uint64_t unattributed_reuse(const RunReport& report);

// The timeline sample with the most used blocks (the first on ties); none when
// the timeline is empty.
const UtilisationSample* peak_sample(const RunReport& report);
// Valid over allocated rows of the sample's referenced blocks; nullopt when
// none was referenced.
std::optional<double> memory_efficiency(const UtilisationSample& sample);

// One row of --compare measured against the first row (the baseline).
struct ComparisonRatios {
  std::optional<double> prefill_rows_computed;
  std::optional<double> decode_kv_bytes_read;
  std::optional<double> peak_pool_bytes;
  std::optional<double> wall_s;
};
ComparisonRatios comparison_ratios(const ComparisonRow& baseline, const ComparisonRow& row);

// The updates section as (label, value) rows, values with their units, for
// the terminal summary and report.md; empty when [updates] was off.
std::vector<std::pair<std::string, std::string>> updates_rows(const UpdatesSummary& u);

// The first line of every summary: "exact: yes — N requests verified against
// a no-reuse run, M reused rows bitwise equal" or "exact: NO — first mismatch: ...".
std::string verdict_line(const RunReport& report);

// Rejection bucket b lies between funnel stages b and b+1 (0x0CF); the stage
// whose count bucket b lowers, when the report's stages and buckets line up
// that way (stages = buckets + 1), else absent.
std::optional<size_t> stage_after_bucket(const RunReport& report, size_t bucket);

}  // namespace kvrt::report
