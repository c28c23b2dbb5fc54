#include "tools/watch/scraped_latency.hpp"

#include <httplib.h>

#include <charconv>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvrt::watch {

namespace {

constexpr std::string_view kBucket = "kvrt_receipt_latency_seconds_bucket{";
constexpr std::string_view kSum = "kvrt_receipt_latency_seconds_sum{";

// The value of label `key` in a label block `a="x",b="y"` (no escapes in
// kvrt's route names).
std::optional<std::string> label(std::string_view labels, std::string_view key) {
  const std::string needle = std::string(key) + "=\"";
  size_t at = 0;
  while ((at = labels.find(needle, at)) != std::string_view::npos) {
    if (at == 0 || labels[at - 1] == ',') {
      const size_t start = at + needle.size();
      const size_t end = labels.find('"', start);
      if (end == std::string_view::npos) return std::nullopt;
      return std::string(labels.substr(start, end - start));
    }
    at += needle.size();
  }
  return std::nullopt;
}

std::optional<double> number(std::string_view s) {
  if (s == "+Inf") return INFINITY;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

struct Cumulative {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
  double sum = 0;
};

}  // namespace

RouteHistograms parse_route_latency(std::string_view text) {
  std::map<std::string, Cumulative> found;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const bool bucket = line.starts_with(kBucket), sum = line.starts_with(kSum);
    if (!bucket && !sum) continue;
    const size_t open = line.find('{'), close = line.rfind('}');
    if (close == std::string_view::npos || close + 2 > line.size()) continue;
    const std::string_view labels = line.substr(open + 1, close - open - 1);
    const std::optional<std::string> route = label(labels, "route");
    const std::optional<double> value = number(line.substr(close + 2));
    if (!route || !value) continue;
    if (sum) {
      found[*route].sum = *value;
      continue;
    }
    const std::optional<std::string> le = label(labels, "le");
    const std::optional<double> bound = le ? number(*le) : std::nullopt;
    if (bound) found[*route].buckets.emplace_back(*bound, *value);
  }
  RouteHistograms out;
  for (auto& [route, c] : found) {
    if (c.buckets.empty() || !std::isinf(c.buckets.back().first)) continue;
    metrics::HistogramValue h;
    h.sum = c.sum;
    double before = 0;
    bool ok = true;
    for (const auto& [le, cumulative] : c.buckets) {
      if (cumulative < before) ok = false;
      if (!std::isinf(le)) h.upper_bounds.push_back(le);
      h.bucket_counts.push_back(static_cast<uint64_t>(cumulative - before));
      before = cumulative;
    }
    if (ok && h.bucket_counts.size() == h.upper_bounds.size() + 1) out.emplace(route, std::move(h));
  }
  return out;
}

Result<std::string> fetch_scrape(const std::string& url, std::chrono::milliseconds timeout) {
  const size_t scheme = url.find("://");
  const size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || path == std::string::npos)
    return make_error(ErrorCode::invalid_argument, "not an http URL: " + url, "metrics_url");
  httplib::Client client(url.substr(0, path));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  httplib::Result r = client.Get(url.substr(path));
  if (!r)
    return make_error(ErrorCode::node_unreachable, "cannot scrape " + url + ": " + httplib::to_string(r.error()),
                      "metrics_url");
  if (r->status != 200)
    return make_error(ErrorCode::node_unreachable, url + " answered " + std::to_string(r->status), "metrics_url");
  return r->body;
}

std::optional<metrics::HistogramValue> histogram_since(const metrics::HistogramValue& earlier,
                                                       const metrics::HistogramValue& later) {
  if (earlier.upper_bounds != later.upper_bounds || earlier.bucket_counts.size() != later.bucket_counts.size())
    return std::nullopt;
  metrics::HistogramValue d = later;
  for (size_t i = 0; i < d.bucket_counts.size(); ++i) {
    if (later.bucket_counts[i] < earlier.bucket_counts[i]) return std::nullopt;
    d.bucket_counts[i] = later.bucket_counts[i] - earlier.bucket_counts[i];
  }
  d.sum = later.sum - earlier.sum;
  return d;
}

std::optional<double> histogram_quantile(double q, const metrics::HistogramValue& h) {
  const uint64_t total = std::accumulate(h.bucket_counts.begin(), h.bucket_counts.end(), uint64_t{0});
  if (total == 0 || h.bucket_counts.size() != h.upper_bounds.size() + 1) return std::nullopt;
  const double rank = q * static_cast<double>(total);
  double below = 0;
  for (size_t i = 0; i < h.bucket_counts.size(); ++i) {
    const auto n = static_cast<double>(h.bucket_counts[i]);
    if (below + n >= rank && n > 0) {
      if (i == h.upper_bounds.size())
        return h.upper_bounds.empty() ? std::nullopt : std::optional(h.upper_bounds.back());
      const double lower = i == 0 ? 0.0 : h.upper_bounds[i - 1];
      return lower + (h.upper_bounds[i] - lower) * (rank - below) / n;
    }
    below += n;
  }
  return h.upper_bounds.empty() ? std::nullopt : std::optional(h.upper_bounds.back());
}

}  // namespace kvrt::watch
