#pragma once
// Receipt latency read back from a node's scrape (GET /metrics): the
// kvrt_receipt_latency_seconds histogram per route, and the quantile of the
// observations between two scrapes, estimated as Prometheus's
// histogram_quantile() does (linear within the bucket that holds it).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "metrics/prometheus_exposition.hpp"
#include "services/common/result.hpp"

namespace kvrt::watch {

// route name -> its histogram (counts per bucket, not cumulative).
using RouteHistograms = std::map<std::string, metrics::HistogramValue>;

// Every kvrt_receipt_latency_seconds series of an exposition. Lines it does
// not know are skipped; a histogram whose buckets go down is dropped.
RouteHistograms parse_route_latency(std::string_view exposition);

// GET of `url` (http://host:port/path). Errors: node_unreachable.
Result<std::string> fetch_scrape(const std::string& url, std::chrono::milliseconds timeout);

// The histogram of what was observed between `earlier` and `later` (the
// same bounds); nullopt when the bounds differ or a count went back.
std::optional<metrics::HistogramValue> histogram_since(const metrics::HistogramValue& earlier,
                                                       const metrics::HistogramValue& later);

// The q-quantile (0 < q < 1) of a histogram's observations [its unit];
// nullopt for an empty one. Past the largest bound it answers that bound.
std::optional<double> histogram_quantile(double q, const metrics::HistogramValue& h);

}  // namespace kvrt::watch
