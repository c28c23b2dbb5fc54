#pragma once
// Receipt latency per route, as the owner that answers it sees it: from
// taking the request off its mailbox to its receipt encoded (decode,
// service call, encode), or for a route the owner answers later (the reuse
// coordinator's transactions, a purge) until it delivers the receipt.
// Mailbox waits before the owner takes the request are not in it; a
// worker's own report (`kvrt worker --json`, receipt_latency) has the
// round trip.
//
// Any thread records, lock-free: one relaxed atomic per bucket, so an owner
// pays two clock reads and two increments per receipt, and a scrape reads
// a consistent-enough snapshot without stopping anyone (a count may lead its
// sum by one observation in flight).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "metrics/prometheus_exposition.hpp"

namespace kvrt::metrics {

class RouteLatency {
 public:
  // Bucket bounds [s]: 5 us to 1 s, about three per decade; receipts of an
  // owner on one node are tens of microseconds, a purge can take seconds.
  static constexpr std::array<double, 16> kUpperBounds{5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3,
                                                       2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 1.0};
  static constexpr uint16_t kMaxRoutes = 64;  // route numbers are small (services/session/routes.hpp)

  // Records one receipt of route `route`; a number past kMaxRoutes is ignored.
  void record(uint16_t route, std::chrono::nanoseconds elapsed);

  // Route `route`'s histogram so far [s]; count 0 when it never answered.
  HistogramValue snapshot(uint16_t route) const;
  uint64_t count(uint16_t route) const;

 private:
  struct PerRoute {
    std::array<std::atomic<uint64_t>, kUpperBounds.size() + 1> buckets{};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::array<PerRoute, kMaxRoutes> routes_{};
};

}  // namespace kvrt::metrics
