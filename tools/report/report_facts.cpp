#include "tools/report/report_facts.hpp"

#include <cmath>

#include "tools/report/report_format.hpp"

namespace kvrt::report {

std::optional<double> reuse_ratio(uint64_t reused_rows, uint64_t computed_rows) {
  const double total = static_cast<double>(reused_rows) + static_cast<double>(computed_rows);
  if (total == 0) return std::nullopt;
  return static_cast<double>(reused_rows) / total;
}

std::optional<double> saving_ratio(double baseline, double value) {
  if (!std::isfinite(value) || value <= 0 || !std::isfinite(baseline)) return std::nullopt;
  return baseline / value;
}

uint64_t unattributed_reuse(const RunReport& r) {
  const uint64_t attributed = r.reused_by_hash_chain + r.reused_by_radix;
  // The sum of two counters can overflow only for corrupt input; treat it as
  // "everything attributed" rather than printing a wrapped figure.
  if (attributed < r.reused_by_hash_chain) return 0;
  return r.prefill_rows_reused > attributed ? r.prefill_rows_reused - attributed : 0;
}

const UtilisationSample* peak_sample(const RunReport& r) {
  const UtilisationSample* peak = nullptr;
  for (const auto& s : r.timeline)
    if (peak == nullptr || s.used_blocks > peak->used_blocks) peak = &s;
  return peak;
}

std::optional<double> memory_efficiency(const UtilisationSample& s) {
  if (s.allocated_rows == 0) return std::nullopt;
  return static_cast<double>(s.valid_rows) / static_cast<double>(s.allocated_rows);
}

ComparisonRatios comparison_ratios(const ComparisonRow& base, const ComparisonRow& row) {
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  return ComparisonRatios{
      saving_ratio(d(base.prefill_rows_computed), d(row.prefill_rows_computed)),
      saving_ratio(d(base.decode_kv_bytes_read), d(row.decode_kv_bytes_read)),
      saving_ratio(d(base.peak_pool_bytes), d(row.peak_pool_bytes)),
      saving_ratio(base.wall_s, row.wall_s),
  };
}

std::string verdict_line(const RunReport& r) {
  if (r.exact)
    return "exact: yes \u2014 " + std::to_string(r.requests_verified) + " requests verified against a no-reuse run, " +
           std::to_string(r.reused_rows_checked) + " reused rows bitwise equal";
  const std::string first = r.first_mismatch.empty() ? "not recorded" : printable(r.first_mismatch);
  return "exact: NO \u2014 first mismatch: " + first + " (" + std::to_string(r.token_mismatches) + " of " +
         std::to_string(r.requests_verified) + " requests generated other tokens, " +
         std::to_string(r.reused_row_mismatches) + " of " + std::to_string(r.reused_rows_checked) +
         " reused rows differ)";
}

std::optional<size_t> stage_after_bucket(const RunReport& r, size_t bucket) {
  if (r.funnel_stages.size() != r.rejection_buckets.size() + 1 || bucket >= r.rejection_buckets.size())
    return std::nullopt;
  return bucket + 1;
}

std::vector<std::pair<std::string, std::string>> updates_rows(const UpdatesSummary& u) {
  if (!u.enabled) return {};
  auto n = [](uint64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> rows{
      {"updates", n(u.weights_updates) + " weights updates, " + n(u.adapter_swaps) + " adapter swaps, " + n(u.purges) +
                      " purges (namespace operations), " + n(u.failed) + " refused"},
      {"invalidate receipt p50 / p99", fixed(u.invalidate_p50_us, 1) + " / " + fixed(u.invalidate_p99_us, 1) + " us"},
      {"purge begin to completion p50 / p99", fixed(u.purge_p50_us, 1) + " / " + fixed(u.purge_p99_us, 1) + " us"},
      {"purges' receipts", n(u.receipts_drained) + " drained within the deadline, " + n(u.receipts_revoked) +
                               " revoked; " + n(u.blocks_marked_for_overwrite) +
                               " blocks marked for overwrite before a new owner"},
      {"requests on updated weights", n(u.requests_on_successor_weights) + " requests, " + n(u.weight_variants) +
                                          " weight sets drawn per worker (max)"},
      {"workers' refusals", n(u.stale_generation_refusals) + " stale generation, " + n(u.namespace_closed_refusals) +
                                " namespace closed, " + n(u.workers_receipts_revoked) + " receipts revoked; " +
                                n(u.reauthorizations) + " reauthorizations"},
      {"stale hits", u.stale_checked
                         ? n(u.stale_hits) + " rows, " + n(u.stale_bytes_read) + " bytes of another generation read"
                         : std::string("not checked: no request was replayed ([run] verify = false)")},
      {"hits of another generation",
       n(u.foreign_generation_hits) + " reuse receipts named another generation than the request's grant"},
      {"throughput", fixed(u.requests_per_s, 1) + " requests/s with updates" +
                         (u.baseline_requests_per_s > 0 ? ", " + fixed(u.baseline_requests_per_s, 1) +
                                                              " without (ratio " + fixed(u.throughput_ratio, 3) + ")"
                                                        : std::string(", no baseline pass"))},
      {"longest time no request finished",
       fixed(u.longest_gap_s * 1000, 1) + " ms" +
           (u.baseline_requests_per_s > 0 ? " (" + fixed(u.baseline_longest_gap_s * 1000, 1) + " ms without)"
                                          : std::string())}};
  return rows;
}

}  // namespace kvrt::report
