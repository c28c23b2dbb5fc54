// Histograms of svg_plot.hpp: one panel per entry, stacked, sharing log10
// bins on the x axis so panels can be compared by eye; each panel's count
// axis runs from 0 to its own largest count.
#include <algorithm>
#include <cmath>

#include "tools/report/report_format.hpp"
#include "tools/report/svg_canvas.hpp"
#include "tools/report/svg_plot.hpp"

namespace kvrt::report::svg {
namespace {
constexpr double kWidth = 760, kTop = 44;                              // [px]
constexpr double kPanelTitle = 42, kPanelPlot = 110, kPanelAxis = 44;  // [px]
constexpr size_t kLegendChars = 24;                                    // fits the 170 px right of the plots
constexpr double kPanel = kPanelTitle + kPanelPlot + kPanelAxis;
constexpr double kPlotX = 72, kPlotWidth = 500;

bool is_power_of_ten(double v) {
  const double l = std::log10(v);
  return std::fabs(l - std::round(l)) < 1e-9;
}

// Tick marks on the log axis: the decades, or every edge when fewer than two
// decades fall inside (a narrow latency range still gets labels).
std::vector<double> log_ticks(const std::vector<double>& edges) {
  std::vector<double> decades;
  for (double e : edges)
    if (is_power_of_ten(e)) decades.push_back(e);
  return decades.size() >= 2 ? decades : edges;
}

// Counts are integers: a step below 1 would label fractions of a call.
std::vector<double> count_ticks(double max_count) {
  if (nice_step(max_count, 3) < 1) return {0, max_count};
  return nice_ticks(0, max_count, 3);
}
}  // namespace

std::string render_histogram(const Histogram& chart) {
  const bool bins_ok = chart.edges.size() >= 2 && chart.edges.front() > 0 &&
                       std::is_sorted(chart.edges.begin(), chart.edges.end()) &&
                       std::all_of(chart.edges.begin(), chart.edges.end(), [](double e) { return std::isfinite(e); });
  const Domain x = bins_ok ? Domain{chart.edges.front(), chart.edges.back(), true} : Domain{1, 10, true};
  const size_t bins = bins_ok ? chart.edges.size() - 1 : 0;
  // No panel at all still draws one empty plot, saying so.
  std::vector<HistogramPanel> panels = chart.panels;
  if (panels.empty()) panels.push_back(HistogramPanel{"", {}, {}});

  const double height = kTop + kPanel * static_cast<double>(panels.size()) + 8;
  Canvas c(kWidth, height, chart.title);
  std::vector<LegendEntry> legend{{"calls per bin", palette(0), LegendEntry::Mark::swatch}};
  for (size_t p = 0; p < panels.size(); ++p) {
    const auto& panel = panels[p];
    const Area plot{kPlotX, kTop + kPanel * static_cast<double>(p) + kPanelTitle, kPlotWidth, kPanelPlot};
    uint64_t max_count = 0, total = 0;
    const bool counts_ok = bins > 0 && panel.counts.size() == bins;
    if (counts_ok)
      for (uint64_t n : panel.counts) max_count = std::max(max_count, n), total += n;
    const Domain y{0, max_count > 0 ? static_cast<double>(max_count) : 1, false};
    c.text(plot.x, plot.y - 26, panel.title, "panel-title", "start", 13);
    c.frame(plot, x, y);
    const auto y_ticks = count_ticks(y.max);
    c.y_axis(plot, y, y_ticks, std::max(1.0, nice_step(y.max, 3)), chart.y_axis.text());
    const auto x_ticks = bins_ok ? log_ticks(chart.edges) : std::vector<double>{1, 10};
    // tick_label with the value as its own step gives 0.001 three decimals and 1000 none.
    for (double t : x_ticks) {
      const double px = x.map(t, plot.x, plot.right());
      c.line(px, plot.bottom(), px, plot.bottom() + 5, "#333333", "tick");
      c.text(px, plot.bottom() + 18, tick_label(t, t), "tick-label", "middle", 11);
    }
    c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), "#333333", "axis");
    c.text(plot.x + plot.width / 2, plot.bottom() + 36, chart.x_axis.text(), "axis-label", "middle");
    if (!counts_ok || total == 0) {
      c.no_samples(plot);
      continue;
    }
    for (size_t k = 0; k < bins; ++k) {
      const double x0 = x.map(chart.edges[k], plot.x, plot.right());
      const double x1 = x.map(chart.edges[k + 1], plot.x, plot.right());
      const double top = y.map(static_cast<double>(panel.counts[k]), plot.bottom(), plot.y);
      const std::string data = "stroke=\"#ffffff\" data-panel=\"" + std::to_string(p) + "\" data-bin=\"" +
                               std::to_string(k) + "\" data-count=\"" + std::to_string(panel.counts[k]) + "\"";
      c.rect(Area{x0, top, x1 - x0, plot.bottom() - top}, palette(0), "bar", data);
    }
    for (size_t m = 0; m < panel.markers.size(); ++m) {
      if (!std::isfinite(panel.markers[m].x)) continue;
      const double px = x.map(panel.markers[m].x, plot.x, plot.right());
      c.line(px, plot.y, px, plot.bottom(), palette(3 + m), "marker", true);
    }
  }
  // Panels share their marker kinds (p50, p99, ...); the first panel that has
  // any names them in the legend.
  const auto named = std::find_if(panels.begin(), panels.end(), [](const auto& p) { return !p.markers.empty(); });
  if (named != panels.end())
    for (size_t m = 0; m < named->markers.size(); ++m)
      legend.push_back({named->markers[m].name, palette(3 + m), LegendEntry::Mark::dashed_line});
  c.legend(kPlotX + kPlotWidth + 18, kTop + kPanelTitle + 10, legend, kLegendChars);
  return c.finish();
}

}  // namespace kvrt::report::svg
