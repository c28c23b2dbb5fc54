// The plots of the run report: well-formed SVG whose plotted
// values lie where the documented coordinate convention puts them, recomputed
// here from the plot-area attributes (the largest bar spans the plot, t = max
// lies on the right edge, histogram bars on log10-spaced bin edges).
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

TEST_CASE("funnel.svg: the largest stage spans the plot, others in proportion", "[report]") {
  RunReport r = known_report();
  r.funnel_stages[1].first = "authorized <&> \"'";  // escaped in labels, decoded back by the checker
  const XmlElement svg = well_formed(render_funnel_svg(r));
  const auto areas = svg.all("rect", "plot-area");
  REQUIRE(areas.size() == 1);
  const PlotArea a = plot_area(areas[0]);
  const auto bars = svg.all("rect", "bar");
  REQUIRE(bars.size() == r.funnel_stages.size());
  const double largest = 12;  // N_req, the first stage
  for (size_t i = 0; i < bars.size(); ++i) {
    CAPTURE(i);
    CHECK(bars[i]->attr("data-label") == r.funnel_stages[i].first);
    CHECK(bars[i]->number("data-value") == static_cast<double>(r.funnel_stages[i].second));
    CHECK(bars[i]->number("x") == Approx(a.x).margin(kPx));
    CHECK(bars[i]->number("width") ==
          Approx(static_cast<double>(r.funnel_stages[i].second) / largest * a.width).margin(2 * kPx));
  }
  CHECK(bars[0]->number("width") == Approx(a.width).margin(2 * kPx));
  // Each stage after the first names the bucket that lost the difference.
  CHECK(has_text(svg, "bar-value", "11  \u22121 authorization"));
  CHECK(has_text(svg, "bar-value", "9  \u22122 index_miss"));
  CHECK(has_text(svg, "bar-value", "4  \u22121 stale_snapshot"));
  CHECK(has_text(svg, "axis-label", "reuse attempts"));
  CHECK(svg.all("title").front()->text == "Reuse funnel (0x0CF): attempts reaching each stage");

  // Buckets that do not line up with stages become bars of their own.
  r.funnel_stages.pop_back();
  const XmlElement loose = well_formed(render_funnel_svg(r));
  CHECK(loose.all("rect", "bar").size() == r.funnel_stages.size() + r.rejection_buckets.size());
  CHECK(loose.all("rect", "bar").back()->attr("data-label") == "rejected: execution");
}

TEST_CASE("utilisation.svg: samples map to time and block coordinates", "[report]") {
  const RunReport r = known_report();
  const XmlElement svg = well_formed(render_utilisation_svg(r));
  const PlotArea a = plot_area(svg.all("rect", "plot-area").at(0));
  CHECK(a.x_min == 0);
  CHECK(a.x_max == 4.0);  // the last sample's time
  CHECK(a.y_max >= 128);  // capacity fits under the top tick
  const auto lines = svg.all("polyline", "series");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]->attr("data-series") == "used (live + in transaction)");
  CHECK(lines[2]->attr("data-series") == "capacity");
  const auto used = points(lines[0]);
  REQUIRE(used.size() == r.timeline.size());
  for (size_t i = 0; i < used.size(); ++i) {
    CAPTURE(i);
    CHECK(used[i].first == Approx(x_px(a, r.timeline[i].t_s)).margin(kPx));
    CHECK(used[i].second == Approx(y_px(a, static_cast<double>(r.timeline[i].used_blocks))).margin(kPx));
  }
  CHECK(used.front().first == Approx(a.x).margin(kPx));           // t = 0 on the left edge
  CHECK(used.back().first == Approx(a.x + a.width).margin(kPx));  // t = max on the right edge
  CHECK(points(lines[1]).back().second == Approx(y_px(a, 32)).margin(kPx));
  CHECK(has_text(svg, "axis-label", "[s]"));
  CHECK(has_text(svg, "axis-label", "[blocks]"));
  // The y axis ends on a labelled tick, at or above the capacity.
  bool top_labelled = false;
  for (const auto& label : texts(svg, "tick-label")) top_labelled = top_labelled || std::stod(label) == a.y_max;
  CHECK(top_labelled);
  CHECK(texts(svg, "legend-label").size() == 3);
}

TEST_CASE("latency.svg: one histogram per owner on shared log bins", "[report]") {
  const RunReport r = known_report();
  const XmlElement svg = well_formed(render_latency_svg(r));
  const auto owners = merge_owners(r.latencies);
  const LatencyBins bins = latency_bins(owners);
  const auto areas = svg.all("rect", "plot-area");
  REQUIRE(areas.size() == owners.size());
  const auto bars = svg.all("rect", "bar");
  for (size_t p = 0; p < owners.size(); ++p) {
    CAPTURE(p);
    const PlotArea a = plot_area(areas[p]);
    CHECK(a.log10);
    CHECK(a.x_min == bins.edges_us.front());
    CHECK(a.x_max == bins.edges_us.back());
    const auto counts = bin_counts(owners[p].samples_us, bins);
    const uint64_t max_count = *std::max_element(counts.begin(), counts.end());
    size_t seen = 0;
    for (const auto* bar : bars) {
      if (bar->attr("data-panel") != std::to_string(p)) continue;
      const auto k = static_cast<size_t>(bar->number("data-bin"));
      CAPTURE(k);
      ++seen;
      CHECK(bar->number("data-count") == static_cast<double>(counts[k]));
      CHECK(bar->number("x") == Approx(x_px(a, bins.edges_us[k])).margin(kPx));
      CHECK(bar->number("x") + bar->number("width") == Approx(x_px(a, bins.edges_us[k + 1])).margin(2 * kPx));
      CHECK(bar->number("height") ==
            Approx(static_cast<double>(counts[k]) / static_cast<double>(max_count) * a.height).margin(2 * kPx));
      if (counts[k] == max_count) CHECK(bar->number("height") == Approx(a.height).margin(kPx));
    }
    CHECK(seen == bins.bin_count());
  }
  CHECK(has_text(svg, "panel-title", "allocator \u2014 100 calls, p50 50.00 \u00b5s, p99 99.00 \u00b5s"));
  CHECK(has_text(svg, "panel-title", "authorization \u2014 5 calls"));
  CHECK(svg.all("line", "marker").size() == 2 * owners.size());
  CHECK(has_text(svg, "axis-label", "[\u00b5s]"));
}
