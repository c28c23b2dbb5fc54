#pragma once
// Receipt latency per owner: the percentiles the summary prints and
// the log-scaled histogram report.json and latency.svg show. A sample is one
// call's receipt latency as a worker saw it [us].
#include <cstdint>
#include <string>
#include <vector>

#include "tools/report/run_report.hpp"

namespace kvrt::report {

struct OwnerLatencySummary {
  std::string owner;      // sanitize_utf8 of the owner's name
  uint64_t calls = 0;     // samples recorded, one per call
  uint64_t measured = 0;  // of which finite: NaN or infinity is not a measurement and
                          // is left out of percentiles and histograms
  double p50_us = 0;      // nearest rank over the measured samples [us]; 0 when none
  double p90_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

// Owners in first-seen order; entries with equal names (after sanitize_utf8)
// are one owner with their samples concatenated, because a driver may report
// one entry per worker and per owner.
std::vector<OwnerLatency> merge_owners(const std::vector<OwnerLatency>& latencies);
OwnerLatencySummary summarise(const OwnerLatency& owner);

// Bins on a logarithmic microsecond axis whose edges follow the 1-2-5 series
// (..., 0.5, 1, 2, 5, 10, 20, ...): bin i is [edges_us[i], edges_us[i+1]).
// Empty (no bins) when there is no finite sample.
struct LatencyBins {
  std::vector<double> edges_us;
  size_t bin_count() const { return edges_us.empty() ? 0 : edges_us.size() - 1; }
};
inline constexpr double kLowestLatencyEdgeUs = 1e-3;  // 1 ns: below it nothing is resolved
inline constexpr size_t kMaxLatencyBins = 75;         // 25 decades

// The bins that cover every finite sample of every owner, so that owners share
// one axis: from the largest edge <= the smallest positive sample (at least
// kLowestLatencyEdgeUs) to the smallest edge > the largest sample. When that
// spans more than kMaxLatencyBins bins the upper end (the tail) is kept.
LatencyBins latency_bins(const std::vector<OwnerLatency>& owners);
// counts[i] = finite samples in bin i. Samples below the first edge (0, or a
// negative clock step) count in bin 0, samples at or above the last edge in the
// last bin, so the counts add up to the measured samples.
std::vector<uint64_t> bin_counts(const std::vector<double>& samples_us, const LatencyBins& bins);

}  // namespace kvrt::report
