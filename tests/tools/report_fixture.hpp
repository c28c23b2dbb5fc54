#pragma once
// Shared by the [report] suites: a RunReport with known numbers (the 0x0CF
// funnel recorded through the telemetry owner, a ramp of utilisation samples,
// latency samples whose percentiles are obvious, a --compare table), scratch
// directories, and the SVG plot-area convention of svg_canvas.hpp read back
// independently of the writer.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "services/common/units.hpp"
#include "services/telemetry/reuse_funnel.hpp"
#include "tests/tools/report_xml.hpp"
#include "tools/report/run_report.hpp"

namespace kvrt::report_test {

using namespace kvrt::report;
namespace fs = std::filesystem;

// The funnel of 0x0CF's checked synthetic counts (12 > 11 > 9 > 7 > 6 > 6 > 5
// > 4 > 4), recorded through the telemetry owner so the report uses its names.
inline void spec_funnel(RunReport& r) {
  ReuseFunnel f;
  const std::pair<RejectionReason, int> rejections[] = {
      {RejectionReason::namespace_denied, 1},      {RejectionReason::no_candidate, 2},
      {RejectionReason::semantic_mismatch, 1},     {RejectionReason::layout_mismatch, 1},
      {RejectionReason::stale_tree_version, 1},    {RejectionReason::mapping_frontier_lag, 1},
      {RejectionReason::stale_snapshot_version, 1}};
  for (const auto& [reason, n] : rejections)
    for (int i = 0; i < n; ++i) f.record(FunnelOutcome::rejected(reason));
  for (int i = 0; i < 4; ++i) f.record(FunnelOutcome::hit());
  for (size_t s = 0; s < kFunnelStageCount; ++s)
    r.funnel_stages.emplace_back(std::string(to_string(static_cast<FunnelStage>(s))), f.counts().stage[s]);
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    r.rejection_buckets.emplace_back(std::string(to_string(static_cast<ReuseBucket>(b))),
                                     f.rejections(static_cast<ReuseBucket>(b)));
}

inline std::vector<double> range_us(int from, int to) {
  std::vector<double> v;
  for (int i = from; i <= to; ++i) v.push_back(i);
  return v;
}

inline RunReport known_report() {
  RunReport r;
  r.workload_name = "chat <shared> & \"prefix\" | *x*";
  r.workload_origin = "config/workloads/chat.toml";
  r.layout_id = "two-group-tp2";
  r.prefix_index = "hash_chain";
  r.reuse_policy = "immutable_partial_tail";
  r.partial_tail_rows_copied = 700;
  r.started_at = "2024-05-01T12:00:00Z";
  r.workers = 4;
  r.wall_s = 12.5;
  r.requests = 120;
  r.prompt_tokens = 40000;
  r.decode_tokens = 5000;
  r.tokens_requested = 45000;
  r.prefill_rows_computed = 10000;
  r.prefill_rows_reused = 30000;
  r.reused_by_hash_chain = 18000;
  r.reused_by_radix = 11000;  // 1000 rows attributed to neither
  r.shared_prefix_rows_read_once = 1000;
  r.shared_prefix_rows_per_request = 4000;
  spec_funnel(r);
  r.peak_ledger = {96 * kMiB, 48 * kMiB, 24 * kMiB, 128 * kMiB, 482};
  // Used blocks ramp up to 96 at t = 2 s and back down; capacity 128 blocks.
  for (int i = 0; i <= 8; ++i) {
    UtilisationSample s;
    s.t_s = 0.5 * i;
    s.used_blocks = static_cast<uint64_t>(96 - 24 * std::abs(i - 4));
    s.evictable_blocks = static_cast<uint64_t>(4 * i);
    s.capacity_blocks = 128;
    s.live_requests = s.used_blocks / 8;
    s.ledger = r.peak_ledger;
    r.timeline.push_back(s);
  }
  r.pool_utilisation = 96.0 / 128.0;
  r.latencies = {{"allocator", range_us(1, 100)},
                 {"prefix_index", {3, 30, 300, 3000}},
                 {"authorization", {0.5, 0.7}},
                 {"authorization", {0.9, 1.1, std::nan("")}}};
  r.worker_rows = {{"worker-0", 60, 5000, 15000, 2500, 12.0}, {"worker-1", 60, 5000, 15000, 2500, 12.5}};
  r.exact = true;
  r.validate_ok = true;
  r.requests_verified = 120;
  r.reused_rows_checked = 30000;
  r.comparison = {{"no_reuse", 40000, 400 * kMiB, 128 * kMiB, 20.0, true},
                  {"radix", 10000, 400 * kMiB, 64 * kMiB, 12.5, true},
                  {"radix_shared_prefix", 10000, 100 * kMiB, 64 * kMiB, 10.0, true},
                  {"rectangular", 40000, 0, 256 * kMiB, 25.0, true}};
  r.trace_path = "out/trace.json";
  return r;
}

inline fs::path fresh_dir(const std::string& name) {
  static int counter = 0;  // inline function: one counter for the whole binary
  const fs::path p = fs::temp_directory_path() /
                     ("kvrt_report_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)) / name;
  fs::remove_all(p);
  return p;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline XmlElement well_formed(const std::string& doc) {
  auto parsed = parse_xml(doc);
  INFO(parsed.error);
  REQUIRE(parsed.root.has_value());
  REQUIRE(parsed.root->name == "svg");
  return *parsed.root;
}

struct PlotArea {
  double x, y, width, height, x_min, x_max, y_min, y_max;
  bool log10;
};
inline PlotArea plot_area(const XmlElement* e) {
  return PlotArea{e->number("x"),          e->number("y"),          e->number("width"),
                  e->number("height"),     e->number("data-x-min"), e->number("data-x-max"),
                  e->number("data-y-min"), e->number("data-y-max"), e->attr("data-x-scale") == "log10"};
}
// Independent of svg_canvas: the mapping the SVG's convention documents.
inline double x_px(const PlotArea& a, double v) {
  const auto s = [&](double x) { return a.log10 ? std::log10(x) : x; };
  return a.x + (s(v) - s(a.x_min)) / (s(a.x_max) - s(a.x_min)) * a.width;
}
inline double y_px(const PlotArea& a, double v) {
  return a.y + a.height - (v - a.y_min) / (a.y_max - a.y_min) * a.height;
}
constexpr double kPx = 0.006;  // coordinates are written with two decimals

inline std::vector<std::pair<double, double>> points(const XmlElement* polyline) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(polyline->attr("points"));
  std::string pair;
  while (in >> pair) {
    const auto comma = pair.find(',');
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}
inline std::vector<std::string> texts(const XmlElement& svg, std::string_view css_class) {
  std::vector<std::string> out;
  for (const auto* t : svg.all("text", css_class)) out.push_back(t->text);
  return out;
}
inline bool has_text(const XmlElement& svg, std::string_view css_class, const std::string& part) {
  for (const auto& t : texts(svg, css_class))
    if (t.find(part) != std::string::npos) return true;
  return false;
}

// Escapes only what XML requires of character data, independently of
// svg::escape_xml, so the checker can judge whether any text is valid UTF-8
// without control characters other than newline.
inline std::string as_xml_text(std::string_view s) {
  std::string out = "<t>";
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out.push_back(c);
  }
  return out + "</t>";
}

}  // namespace kvrt::report_test
