#include "tools/report/report_latency.hpp"

#include <algorithm>
#include <cmath>

#include "tools/report/report_format.hpp"

namespace kvrt::report {
namespace {

// Above this the next 1-2-5 edge would overflow a double; such a sample is not
// a latency a run produces, it still counts in the last bin.
constexpr double kHighestLatencyEdgeUs = 1e300;

// Edge k of the 1-2-5 series: {1, 2, 5}[k mod 3] * 10^(k div 3), floor division.
double edge(int k) {
  static constexpr double kMantissa[3] = {1, 2, 5};
  const int decade = k >= 0 ? k / 3 : -((-k + 2) / 3);
  return kMantissa[k - 3 * decade] * std::pow(10.0, decade);
}

// The largest k with edge(k) <= x, for finite x > 0.
int floor_edge_index(double x) {
  int k = 3 * static_cast<int>(std::floor(std::log10(x)));
  while (edge(k + 1) <= x) ++k;
  while (edge(k) > x) --k;
  return k;
}

}  // namespace

double percentile(std::vector<double> samples, double p) {
  std::erase_if(samples, [](double s) { return std::isnan(s); });
  if (samples.empty()) return 0;
  if (!(p >= 0)) p = 0;  // also NaN
  if (p > 100) p = 100;
  // Nearest rank: the smallest sample with at least p % of the samples at or
  // below it, i.e. rank ceil(p n / 100); rank 1 (the minimum) for p = 0.
  const size_t n = samples.size();
  const double exact_rank = std::ceil(p * static_cast<double>(n) / 100.0);
  const size_t rank = std::clamp<size_t>(static_cast<size_t>(exact_rank), 1, n);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(rank - 1), samples.end());
  return samples[rank - 1];
}

std::vector<OwnerLatency> merge_owners(const std::vector<OwnerLatency>& latencies) {
  std::vector<OwnerLatency> merged;
  for (const auto& entry : latencies) {
    const std::string name = sanitize_utf8(entry.owner);
    auto it = std::find_if(merged.begin(), merged.end(), [&](const OwnerLatency& m) { return m.owner == name; });
    if (it == merged.end()) {
      merged.push_back(OwnerLatency{name, {}});
      it = merged.end() - 1;
    }
    it->samples_us.insert(it->samples_us.end(), entry.samples_us.begin(), entry.samples_us.end());
  }
  return merged;
}

OwnerLatencySummary summarise(const OwnerLatency& owner) {
  std::vector<double> measured;
  measured.reserve(owner.samples_us.size());
  for (double s : owner.samples_us)
    if (std::isfinite(s)) measured.push_back(s);
  OwnerLatencySummary out;
  out.owner = sanitize_utf8(owner.owner);
  out.calls = owner.samples_us.size();
  out.measured = measured.size();
  out.p50_us = percentile(measured, 50);
  out.p90_us = percentile(measured, 90);
  out.p99_us = percentile(measured, 99);
  out.max_us = percentile(std::move(measured), 100);
  return out;
}

LatencyBins latency_bins(const std::vector<OwnerLatency>& owners) {
  bool any = false;
  double smallest_positive = kHighestLatencyEdgeUs, largest = 0;
  for (const auto& o : owners)
    for (double s : o.samples_us) {
      if (!std::isfinite(s)) continue;
      any = true;
      largest = std::max(largest, s);
      if (s > 0) smallest_positive = std::min(smallest_positive, s);
    }
  if (!any) return {};
  const double low = std::clamp(smallest_positive, kLowestLatencyEdgeUs, kHighestLatencyEdgeUs);
  const double high = std::clamp(largest, kLowestLatencyEdgeUs, kHighestLatencyEdgeUs);
  const int last = floor_edge_index(high) + 1;  // smallest edge > high
  const int first = std::max(std::min(floor_edge_index(low), last - 1), last - static_cast<int>(kMaxLatencyBins));
  LatencyBins bins;
  for (int k = first; k <= last; ++k) bins.edges_us.push_back(edge(k));
  return bins;
}

std::vector<uint64_t> bin_counts(const std::vector<double>& samples_us, const LatencyBins& bins) {
  std::vector<uint64_t> counts(bins.bin_count(), 0);
  if (counts.empty()) return counts;
  for (double s : samples_us) {
    if (!std::isfinite(s)) continue;
    // upper_bound finds the first edge > s; the bin is the one before it.
    const auto above = std::upper_bound(bins.edges_us.begin(), bins.edges_us.end(), s);
    const auto index = std::distance(bins.edges_us.begin(), above) - 1;
    ++counts[std::clamp<std::ptrdiff_t>(index, 0, static_cast<std::ptrdiff_t>(counts.size()) - 1)];
  }
  return counts;
}

}  // namespace kvrt::report
