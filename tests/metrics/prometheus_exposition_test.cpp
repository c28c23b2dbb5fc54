// The text exposition against hand-written expected text (the format's
// rules: HELP and TYPE lines, escaping, cumulative buckets ending in +Inf,
// _sum and _count), the refusals that leave it unchanged (0x0CE label
// hygiene among them), and the latency histograms against a brute-force
// count of the same observations.
#include "metrics/prometheus_exposition.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "metrics/route_latency.hpp"

namespace kvrt::metrics {

TEST_CASE("counters, gauges and histograms are written in the text format 0.0.4", "[metrics]") {
  PrometheusExposition e;
  REQUIRE(e.family("kvrt_sessions_opened_total", MetricType::counter, "Sessions opened.").ok());
  REQUIRE(e.sample(3).ok());
  REQUIRE(e.family("kvrt_pool_blocks", MetricType::gauge, "Blocks by state.\nSecond line \\ here.").ok());
  const std::vector<MetricLabel> free_labels{{"pool", "0"}, {"state", "free"}};
  REQUIRE(e.sample(free_labels, 12).ok());
  const std::vector<MetricLabel> ratio{{"pool", "1"}};
  REQUIRE(e.sample(ratio, 0.25).ok());
  REQUIRE(e.family("kvrt_receipt_latency_seconds", MetricType::histogram, "Latency.").ok());
  HistogramValue h;
  h.upper_bounds = {0.001, 0.01};
  h.bucket_counts = {2, 0, 1};
  h.sum = 0.5;
  const std::vector<MetricLabel> route{{"route", "allocator"}};
  REQUIRE(e.histogram(route, h).ok());
  CHECK(e.text() ==
        "# HELP kvrt_sessions_opened_total Sessions opened.\n"
        "# TYPE kvrt_sessions_opened_total counter\n"
        "kvrt_sessions_opened_total 3\n"
        "# HELP kvrt_pool_blocks Blocks by state.\\nSecond line \\\\ here.\n"
        "# TYPE kvrt_pool_blocks gauge\n"
        "kvrt_pool_blocks{pool=\"0\",state=\"free\"} 12\n"
        "kvrt_pool_blocks{pool=\"1\"} 0.25\n"
        "# HELP kvrt_receipt_latency_seconds Latency.\n"
        "# TYPE kvrt_receipt_latency_seconds histogram\n"
        "kvrt_receipt_latency_seconds_bucket{route=\"allocator\",le=\"0.001\"} 2\n"
        "kvrt_receipt_latency_seconds_bucket{route=\"allocator\",le=\"0.01\"} 2\n"
        "kvrt_receipt_latency_seconds_bucket{route=\"allocator\",le=\"+Inf\"} 3\n"
        "kvrt_receipt_latency_seconds_sum{route=\"allocator\"} 0.5\n"
        "kvrt_receipt_latency_seconds_count{route=\"allocator\"} 3\n");
}

TEST_CASE("label values escape backslash, quote and line feed", "[metrics]") {
  PrometheusExposition e;
  REQUIRE(e.family("kvrt_x", MetricType::gauge, "x").ok());
  // Allowed characters only pass hygiene; a path-like id is one of them.
  const std::vector<MetricLabel> l{{"namespace", "prod/tenant-a"}};
  REQUIRE(e.sample(l, -1.5).ok());
  CHECK(e.text().ends_with("kvrt_x{namespace=\"prod/tenant-a\"} -1.5\n"));
}

TEST_CASE("a refused family or sample leaves the exposition unchanged", "[metrics]") {
  PrometheusExposition e;
  REQUIRE(e.family("kvrt_ok", MetricType::gauge, "ok").ok());
  REQUIRE(e.sample(1).ok());
  const std::string before = e.text();

  CHECK(e.family("9bad", MetricType::gauge, "x").error().code == ErrorCode::invalid_argument);
  CHECK(e.family("kvrt_ok", MetricType::gauge, "again").error().code == ErrorCode::invalid_argument);
  CHECK(e.family("kvrt_hits", MetricType::counter, "no _total").error().code == ErrorCode::invalid_argument);
  CHECK(e.family("kvrt_nohelp", MetricType::gauge, "").error().code == ErrorCode::invalid_argument);
  CHECK(e.sample(1).error().code == ErrorCode::invalid_argument);  // the same (empty) label set twice
  const std::vector<MetricLabel> reserved{{"__name__", "x"}};
  CHECK(e.sample(reserved, 1).error().code == ErrorCode::invalid_argument);
  const std::vector<MetricLabel> twice{{"pool", "0"}, {"pool", "1"}};
  CHECK(e.sample(twice, 1).error().code == ErrorCode::invalid_argument);
  HistogramValue h{{1.0}, {1, 0}, 1.0};
  CHECK(e.histogram({}, h).error().field == "family");  // a gauge family
  CHECK(e.text() == before);

  REQUIRE(e.family("kvrt_events_total", MetricType::counter, "c").ok());
  const std::string with_family = e.text();
  CHECK(e.sample(-1).error().field == "value");
  CHECK(e.text() == with_family);
  REQUIRE(e.family("kvrt_h_seconds", MetricType::histogram, "h").ok());
  const std::string with_histogram = e.text();
  CHECK(e.histogram({}, HistogramValue{{1.0, 0.5}, {0, 0, 0}, 0}).error().field == "upper_bounds");
  CHECK(e.histogram({}, HistogramValue{{1.0}, {0}, 0}).error().field == "bucket_counts");
  const std::vector<MetricLabel> le{{"le", "1"}};
  CHECK(e.histogram(le, h).error().code == ErrorCode::invalid_argument);
  CHECK(e.sample(1).error().code == ErrorCode::invalid_argument);
  CHECK(e.text() == with_histogram);
}

// 0x0CE: metrics carry low-cardinality ids, never raw tokens, prompts or
// unsalted keys. Each attempt is refused where the sample is made.
TEST_CASE("a label carrying a prompt, tokens or an unsalted key is refused at export", "[metrics]") {
  PrometheusExposition e;
  REQUIRE(e.family("kvrt_prefix_cache_hit_tokens_total", MetricType::counter, "hits").ok());
  const std::string before = e.text();
  const std::vector<std::vector<MetricLabel>> refused{
      {{"namespace", "tell me a story about a dragon"}},
      {{"request", "[101, 2023, 2003, 1037]"}},
      {{"block", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
      {{"prompt_id", "Zq9"}},
      {{"cache_key", "0123456789abcdef0123"}},
  };
  for (const std::vector<MetricLabel>& labels : refused) {
    INFO(labels.front().key);
    const Status s = e.sample(labels, 1);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::telemetry_forbidden_label);
    // The error names the label, never its value (it would leak into logs).
    CHECK(s.error().describe().find(labels.front().value) == std::string::npos);
  }
  CHECK(e.text() == before);
  const std::vector<MetricLabel> ok{{"namespace", "prod/tenant-a"}};
  CHECK(e.sample(ok, 1).ok());
}

TEST_CASE("route latency buckets hold what a brute-force count of the observations says", "[metrics]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  RouteLatency latency;
  std::vector<std::vector<int64_t>> seen(RouteLatency::kMaxRoutes);
  std::uniform_int_distribution<int> route(0, 12);
  std::uniform_real_distribution<double> log10_ns(2.0, 9.7);  // 100 ns .. 5 s
  for (int i = 0; i < 20000; ++i) {
    const auto r = static_cast<uint16_t>(route(rng));
    int64_t ns = static_cast<int64_t>(std::pow(10.0, log10_ns(rng)));
    if (i % 97 == 0) ns = std::llround(RouteLatency::kUpperBounds[i % 16] * 1e9);  // exactly on a bound
    latency.record(r, std::chrono::nanoseconds(ns));
    seen[r].push_back(ns);
  }
  latency.record(RouteLatency::kMaxRoutes, std::chrono::seconds(1));  // past the table: ignored
  for (uint16_t r = 0; r < RouteLatency::kMaxRoutes; ++r) {
    const HistogramValue h = latency.snapshot(r);
    REQUIRE(h.bucket_counts.size() == RouteLatency::kUpperBounds.size() + 1);
    CHECK(latency.count(r) == seen[r].size());
    uint64_t cumulative = 0;
    double sum = 0;
    for (int64_t ns : seen[r]) sum += static_cast<double>(ns) / 1e9;
    for (size_t b = 0; b < RouteLatency::kUpperBounds.size(); ++b) {
      cumulative += h.bucket_counts[b];
      uint64_t expected = 0;
      for (int64_t ns : seen[r])
        if (static_cast<double>(ns) / 1e9 <= RouteLatency::kUpperBounds[b]) ++expected;
      INFO("route " << r << " le " << RouteLatency::kUpperBounds[b]);
      CHECK(cumulative == expected);
    }
    CHECK(h.sum == Approx(sum).epsilon(1e-9));
  }
}

}  // namespace kvrt::metrics
