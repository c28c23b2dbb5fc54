#include "metrics/route_latency.hpp"

#include <algorithm>

namespace kvrt::metrics {

void RouteLatency::record(uint16_t route, std::chrono::nanoseconds elapsed) {
  if (route >= kMaxRoutes) return;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  // The first bound at or above the observation: Prometheus buckets are
  // "less than or equal" (le).
  const size_t b =
      static_cast<size_t>(std::lower_bound(kUpperBounds.begin(), kUpperBounds.end(), seconds) - kUpperBounds.begin());
  PerRoute& r = routes_[route];
  r.buckets[b].fetch_add(1, std::memory_order_relaxed);
  r.sum_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())), std::memory_order_relaxed);
}

HistogramValue RouteLatency::snapshot(uint16_t route) const {
  HistogramValue h;
  h.upper_bounds.assign(kUpperBounds.begin(), kUpperBounds.end());
  h.bucket_counts.assign(kUpperBounds.size() + 1, 0);
  if (route >= kMaxRoutes) return h;
  const PerRoute& r = routes_[route];
  for (size_t i = 0; i < r.buckets.size(); ++i) h.bucket_counts[i] = r.buckets[i].load(std::memory_order_relaxed);
  h.sum = static_cast<double>(r.sum_ns.load(std::memory_order_relaxed)) * 1e-9;
  return h;
}

uint64_t RouteLatency::count(uint16_t route) const {
  if (route >= kMaxRoutes) return 0;
  uint64_t n = 0;
  for (const auto& b : routes_[route].buckets) n += b.load(std::memory_order_relaxed);
  return n;
}

}  // namespace kvrt::metrics
