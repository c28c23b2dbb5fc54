// The report of `kvrt run`: a RunReport built by hand with known
// numbers whose derived figures (ratios, percentiles, histogram bins) the
// tests recompute on their own; the written files read back (nlohmann for
// JSON, report_xml.hpp for SVG); failures as typed io errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/tools/report_fixture.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"
#include "tools/report/report_render.hpp"
#include "tools/report/svg_canvas.hpp"

using namespace kvrt;
using namespace kvrt::report;
using namespace kvrt::report_test;

namespace {
// Brute-force nearest rank: the smallest sample s with 100 * #{x <= s} >= p * n.
double nearest_rank(std::vector<double> v, int p) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (100 * (i + 1) >= static_cast<size_t>(p) * v.size()) return v[i];
  return v.back();
}

}  // namespace

TEST_CASE("percentile is the nearest rank of the sorted samples", "[report]") {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> v(std::uniform_int_distribution<size_t>(1, 60)(rng));
    for (auto& x : v) x = std::uniform_int_distribution<int>(0, 20)(rng);  // many ties
    for (int p = 0; p <= 100; ++p) {
      CAPTURE(trial, p, v);
      CHECK(percentile(v, p) == nearest_rank(v, p));
    }
  }
  CHECK(percentile({}, 50) == 0);
  CHECK(percentile({5, 1, 3}, 150) == 5);            // clamped to 100
  CHECK(percentile({5, 1, 3}, -3) == 1);             // clamped to 0: the minimum
  CHECK(percentile({std::nan(""), 2, 4}, 50) == 2);  // NaN is not a sample
}

TEST_CASE("latency bins follow the 1-2-5 series and count like a linear scan", "[report]") {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> samples(std::uniform_int_distribution<size_t>(1, 200)(rng));
    const double decades = std::uniform_real_distribution<double>(0, 8)(rng);
    for (auto& s : samples) s = std::pow(10.0, std::uniform_real_distribution<double>(-4, decades)(rng));
    samples.push_back(0);  // a zero latency counts in the first bin
    const LatencyBins bins = latency_bins({{"x", samples}});
    CAPTURE(trial);
    REQUIRE(bins.bin_count() >= 1);
    for (size_t k = 0; k + 1 < bins.edges_us.size(); ++k) {
      const double ratio = bins.edges_us[k + 1] / bins.edges_us[k];
      CHECK((std::fabs(ratio - 2) < 1e-9 || std::fabs(ratio - 2.5) < 1e-9));
      const double mantissa = bins.edges_us[k] / std::pow(10.0, std::floor(std::log10(bins.edges_us[k]) + 1e-12));
      CHECK((std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9));
    }
    const double max = *std::max_element(samples.begin(), samples.end());
    CHECK(bins.edges_us.back() > max);
    // The first edge is the largest 1-2-5 edge at or below the smallest
    // positive sample (or 1 ns): it and the next edge bracket that sample.
    double low = max;
    for (double s : samples)
      if (s > 0) low = std::min(low, s);
    low = std::max(low, kLowestLatencyEdgeUs);
    CHECK(bins.edges_us[0] <= low);
    CHECK(bins.edges_us[1] > low);
    std::vector<uint64_t> expected(bins.bin_count(), 0);
    for (double s : samples) {
      size_t k = 0;
      while (k + 1 < bins.bin_count() && s >= bins.edges_us[k + 1]) ++k;
      ++expected[k];
    }
    CHECK(bin_counts(samples, bins) == expected);
  }
  CHECK(latency_bins({{"none", {}}, {"nan", {std::nan("")}}}).bin_count() == 0);
  // 43 decades would be 129 bins: the tail is kept, the low end folds into bin 0.
  const LatencyBins wide = latency_bins({{"wide", {1e-3, 1e40}}});
  CHECK(wide.bin_count() == kMaxLatencyBins);
  CHECK(wide.edges_us.back() > 1e40);
  CHECK(bin_counts({1e-3, 1e40}, wide)[0] == 1);
}

TEST_CASE("summary_json carries the required keys and ratios derived independently", "[report]") {
  const RunReport r = known_report();
  const nlohmann::json j = summary_json(r);
  for (const char* key : {"exact", "leaked_blocks", "prefill_rows_computed", "prefill_rows_reused", "pool_utilisation",
                          "requests", "workers"})
    CHECK(j.contains(key));
  CHECK(j["exact"] == true);
  CHECK(j["requests"] == 120);
  CHECK(j["workers"] == 4);
  CHECK(j["pool_utilisation"].get<double>() == 0.75);
  CHECK(j["reuse_ratio"].get<double>() == 30000.0 / (30000.0 + 10000.0));
  CHECK(j["reused_unattributed"] == 30000 - 18000 - 11000);
  CHECK(j["shared_prefix_read_saving"].get<double>() == 4000.0 / 1000.0);
  CHECK(j["workload_name"] == r.workload_name);
  CHECK(j["prefix_index"] == "hash_chain");
  CHECK(j["reuse_policy"] == "immutable_partial_tail");
  CHECK(j["partial_tail_rows_copied"] == 700);
  // Funnel: order and counts of 0x0CF, each bucket between its two stages.
  const std::vector<uint64_t> spec_counts = {12, 11, 9, 7, 6, 6, 5, 4, 4};
  REQUIRE(j["funnel"]["stages"].size() == spec_counts.size());
  for (size_t s = 0; s < spec_counts.size(); ++s) {
    CHECK(j["funnel"]["stages"][s]["name"] == std::string(to_string(static_cast<FunnelStage>(s))));
    CHECK(j["funnel"]["stages"][s]["count"] == spec_counts[s]);
  }
  REQUIRE(j["funnel"]["buckets"].size() == 8);
  for (size_t b = 0; b < 8; ++b) {
    CHECK(j["funnel"]["buckets"][b]["count"] == spec_counts[b] - spec_counts[b + 1]);
    CHECK(j["funnel"]["buckets"][b]["between"][1] == j["funnel"]["stages"][b + 1]["name"]);
  }
  // Memory: savings against rectangular (96 / 48, 96 / 24) and the peak sample.
  CHECK(j["peak_ledger"]["unique_physical_bytes"] == 24 * kMiB);
  CHECK(j["peak_ledger_saving_vs_rectangular"]["request_view"].get<double>() == 2.0);
  CHECK(j["peak_ledger_saving_vs_rectangular"]["unique_physical"].get<double>() == 4.0);
  CHECK(j["peak_sample"]["t_s"].get<double>() == 2.0);
  CHECK(j["peak_sample"]["used_blocks"] == 96);
  CHECK(j["timeline_samples"] == 9);
  CHECK_FALSE(j.contains("timeline"));  // the raw timeline belongs to report.json only
  // Latency: 1..100 us has nearest-rank p50 = 50, p90 = 90, p99 = 99; the two
  // authorization entries are one owner whose NaN is a call but not a measurement.
  CHECK(j["latency"]["allocator"]["calls"] == 100);
  CHECK(j["latency"]["allocator"]["p50_us"].get<double>() == 50);
  CHECK(j["latency"]["allocator"]["p90_us"].get<double>() == 90);
  CHECK(j["latency"]["allocator"]["p99_us"].get<double>() == 99);
  CHECK(j["latency"]["allocator"]["max_us"].get<double>() == 100);
  CHECK(j["latency"]["authorization"]["calls"] == 5);
  CHECK(j["latency"]["authorization"]["measured"] == 4);
  CHECK(j["latency"]["authorization"]["p50_us"].get<double>() == 0.7);
  CHECK(j["latency"]["prefix_index"]["p90_us"].get<double>() == 3000);
  // Comparison: baseline / row, > 1 is better; undefined ratios are null.
  const auto& cmp = j["comparison"];
  CHECK(cmp["baseline"] == "no_reuse");
  REQUIRE(cmp["rows"].size() == 4);
  CHECK(cmp["rows"][0]["ratios"]["prefill_rows_computed"].get<double>() == 1.0);
  CHECK(cmp["rows"][1]["ratios"]["prefill_rows_computed"].get<double>() == 40000.0 / 10000.0);
  CHECK(cmp["rows"][1]["ratios"]["peak_pool_bytes"].get<double>() == 128.0 / 64.0);
  CHECK(cmp["rows"][1]["ratios"]["wall_s"].get<double>() == 20.0 / 12.5);
  CHECK(cmp["rows"][2]["ratios"]["decode_kv_bytes_read"].get<double>() == 400.0 / 100.0);
  CHECK(cmp["rows"][3]["ratios"]["decode_kv_bytes_read"].is_null());
  CHECK(cmp["rows"][3]["ratios"]["peak_pool_bytes"].get<double>() == 128.0 / 256.0);
  CHECK(j["worker_rows"][1]["reuse_ratio"].get<double>() == 0.75);
}

TEST_CASE("summary_text leads with the verdict and labels every figure", "[report]") {
  RunReport r = known_report();
  const std::string text = summary_text(r);
  const auto first_line = text.substr(0, text.find('\n'));
  CHECK(first_line ==
        "exact: yes \u2014 120 requests verified against a no-reuse run, 30000 reused rows bitwise equal");
  const auto lines = std::count(text.begin(), text.end(), '\n');
  CHECK(lines >= 20);
  CHECK(lines <= 40);
  for (const char* expected :
       {"75.0 % of prompt rows reused", "hash chain 18000 rows, radix 11000 rows", "unattributed 1000 rows",
        "requests 12 > authorized 11", "executed 4", "index_miss 2", "24.00 MiB", "0.00 MiB (482 bytes)", "validate ok",
        "4.00x", "p99 [us]", "0 leaked blocks", "baseline no_reuse", "n/a", "trace: out/trace.json",
        "(4.00x fewer reads)", "hash_chain index, immutable_partial_tail reuse",
        "700 reused rows copied out of partial tails"})
    CHECK_THAT(text, Catch::Contains(expected));

  r.exact = false;
  r.token_mismatches = 2;
  r.reused_row_mismatches = 7;
  r.first_mismatch = "request 17, token 3: 42 != 43";
  const std::string bad = summary_text(r);
  CHECK(bad.substr(0, bad.find('\n')) ==
        "exact: NO \u2014 first mismatch: request 17, token 3: 42 != 43 (2 of 120 requests generated other "
        "tokens, 7 of 30000 reused rows differ)");
}

TEST_CASE("write_report writes report.json, report.md and three SVGs", "[report]") {
  const RunReport r = known_report();
  const fs::path dir = fresh_dir("nested/run-1");  // parents are created too
  REQUIRE(write_report(r, dir.string()).ok());
  for (const char* name : {"report.json", "report.md", "utilisation.svg", "funnel.svg", "latency.svg"})
    CHECK(fs::is_regular_file(dir / name));
  for (const auto& entry : fs::directory_iterator(dir)) CHECK(entry.path().extension() != ".tmp");

  const nlohmann::json doc = nlohmann::json::parse(slurp(dir / "report.json"));
  nlohmann::json summary = summary_json(r);
  for (const auto& [key, value] : summary.items())
    if (key != "latency") CHECK(doc[key] == value);
  REQUIRE(doc["timeline"].size() == r.timeline.size());
  CHECK(doc["timeline"][4]["used_blocks"] == 96);
  CHECK(doc["timeline"][4]["ledger"]["rectangular_bytes"] == 96 * kMiB);
  // Histogram bins add up to the measured samples and match the summary's percentiles.
  for (const auto& [owner, stats] : doc["latency"].items()) {
    CHECK(stats["p99_us"] == summary["latency"][owner]["p99_us"]);
    uint64_t total = 0;
    for (const auto& bin : stats["histogram"]["bins"]) total += bin["count"].get<uint64_t>();
    CHECK(total == stats["measured"].get<uint64_t>());
  }

  const std::string md = slurp(dir / "report.md");
  for (const char* section : {"# kvrt run report", "## Verdict", "## Work", "## Reuse", "## Reuse funnel", "## Memory",
                              "## Latency", "## Workers", "## Comparison", "## Node after shutdown"})
    CHECK_THAT(md, Catch::Contains(section));
  for (const char* embed : {"](utilisation.svg)", "](funnel.svg)", "](latency.svg)"})
    CHECK_THAT(md, Catch::Contains(embed));
  for (const char* cite : {"0x00B", "0x02B", "0x02D", "0x02E", "0x04D", "0x07B", "0x0BC", "0x0BL", "0x0CF"})
    CHECK_THAT(md, Catch::Contains(cite));
  CHECK_THAT(md, Catch::Contains("**exact: yes"));
  CHECK_THAT(md, Catch::Contains("| radix | 10000 | 4.00x |"));
  // The workload name cannot open an HTML tag, break a table or start emphasis.
  CHECK_THAT(md, Catch::Contains("chat \\<shared\\> \\& \"prefix\" \\| \\*x\\*"));
  CHECK_THAT(md, !Catch::Contains("<shared>"));
  CHECK_THAT(md, Catch::Contains("| candidates | 9 | 2 | index_miss |"));  // intraword _ stays plain
  fs::remove_all(dir.parent_path().parent_path());
}

TEST_CASE("an empty report still writes valid files that say so", "[report]") {
  const fs::path dir = fresh_dir("empty");
  REQUIRE(write_report(RunReport{}, dir.string()).ok());
  const auto doc = nlohmann::json::parse(slurp(dir / "report.json"));
  CHECK(doc["timeline"].empty());
  CHECK(doc["latency"].empty());
  CHECK(doc["reuse_ratio"].is_null());
  CHECK(doc["peak_sample"].is_null());
  CHECK(doc["comparison"]["rows"].empty());
  for (const char* name : {"utilisation.svg", "funnel.svg", "latency.svg"}) {
    CAPTURE(name);
    const XmlElement svg = well_formed(slurp(dir / name));
    CHECK(texts(svg, "no-samples") == std::vector<std::string>{"no samples"});
  }
  const std::string md = slurp(dir / "report.md");
  for (const char* line : {"No comparison", "No latency samples", "No reuse attempt", "No worker reported",
                           "no timeline samples", "exact: NO"})
    CHECK_THAT(md, Catch::Contains(line));
  CHECK(summary_text(RunReport{}).rfind("exact: NO \u2014 first mismatch: not recorded", 0) == 0);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("write_report failures are io errors naming the path", "[report]") {
  const RunReport r = known_report();
  const fs::path base = fresh_dir("io");
  fs::create_directories(base);
  const fs::path plain = base / "plain-file";
  std::ofstream(plain) << "not a directory";

  SECTION("a directory under a regular file cannot be created") {
    const fs::path target = plain / "report";
    const Status s = write_report(r, target.string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::io);
    CHECK(s.error().field == target.string());
    CHECK_THAT(s.error().reason, Catch::Contains(target.string()));
  }
  SECTION("the directory is a regular file") {
    const Status s = write_report(r, plain.string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::io);
    CHECK(s.error().field == plain.string());
  }
  SECTION("a report file that cannot be replaced names that file and leaves no temporary") {
    const fs::path dir = base / "out";
    fs::create_directories(dir / "report.md" / "occupied");
    const Status s = write_report(r, dir.string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::io);
    CHECK(s.error().field == (dir / "report.md").string());
    for (const auto& entry : fs::directory_iterator(dir)) CHECK(entry.path().extension() != ".tmp");
  }
  SECTION("an empty directory name is a caller error") {
    const Status s = write_report(r, "");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    CHECK(s.error().field == "dir");
  }
  fs::remove_all(base.parent_path());
}

TEST_CASE("text cleaners keep valid UTF-8 and escape XML", "[report]") {
  CHECK(sanitize_utf8("a\xC3\xA9\xE2\x80\x94z") == "a\xC3\xA9\xE2\x80\x94z");
  CHECK(sanitize_utf8("\xC0\xAF") == "\uFFFD\uFFFD");                      // overlong '/'
  CHECK(sanitize_utf8("\xED\xA0\x80") == "\uFFFD\uFFFD\uFFFD");            // a surrogate
  CHECK(sanitize_utf8("\xF4\x90\x80\x80") == "\uFFFD\uFFFD\uFFFD\uFFFD");  // beyond U+10FFFF
  CHECK(sanitize_utf8("tab\there") == "tab\there");
  CHECK(printable("a\nb\x1b\x7f") == "a\uFFFDb\uFFFD\uFFFD");
  CHECK(svg::escape_xml("<a & b>\"'") == "&lt;a &amp; b&gt;&quot;&apos;");
  CHECK(svg::truncate_text("\xC2\xB5\xC2\xB5\xC2\xB5\xC2\xB5", 3) == "\xC2\xB5\xC2\xB5\u2026");
  CHECK(svg::truncate_text("abc", 3) == "abc");
  CHECK(ratio_text(std::nullopt) == "n/a");
  CHECK(svg::nice_ticks(0, 128, 6) == std::vector<double>{0, 50, 100});
  CHECK(svg::nice_ceiling(128, 6) == 150);
  CHECK(svg::nice_ticks(0, 0.3, 3) == std::vector<double>{0, 0.1, 0.2, 0.3});
  for (double t : svg::nice_ticks(1e17, 1e17 + 64, 5)) CHECK((t >= 1e17 && t <= 1e17 + 64));  // terminates
  CHECK(mib_text(13107200) == "12.50 MiB");
  CHECK(mib_text(482) == "0.00 MiB (482 bytes)");
  CHECK(mib_text(0) == "0.00 MiB");
}
