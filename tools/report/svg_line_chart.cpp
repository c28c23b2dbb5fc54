// Line chart of svg_plot.hpp: series of (x, y) points over a linear x axis
// and a y axis from 0 to a labelled tick at or above the largest value.
#include <algorithm>
#include <cmath>

#include "tools/report/svg_canvas.hpp"
#include "tools/report/svg_plot.hpp"

namespace kvrt::report::svg {
namespace {
constexpr double kWidth = 800, kHeight = 380;          // [px]
constexpr Area kPlot{72, 56, 500, kHeight - 56 - 56};  // legend to the right of it
constexpr size_t kLegendChars = 30;                    // fits the 210 px right of the plot
constexpr int kTicks = 6;
}  // namespace

std::string render_line_chart(const LineChart& chart) {
  // Finite points only, in x order: a timeline is drawn left to right even if
  // samples arrived out of order.
  std::vector<Series> series;
  bool any = false;
  double x_min = 0, x_max = 0, y_max = 0;
  for (const auto& s : chart.series) {
    Series clean{s.name, {}};
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) clean.points.emplace_back(x, y);
    std::stable_sort(clean.points.begin(), clean.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [x, y] : clean.points) {
      if (!any) x_min = x_max = x;
      any = true;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x), y_max = std::max(y_max, y);
    }
    series.push_back(std::move(clean));
  }
  if (chart.x_from_zero) x_min = std::min(x_min, 0.0);
  // One distinct x cannot span an axis: give it a unit of room to the right.
  if (!(x_max > x_min)) x_max = x_min + 1;
  const Domain x{x_min, x_max, false};
  const Domain y{0, nice_ceiling(y_max, kTicks), false};

  Canvas c(kWidth, kHeight, chart.title);
  c.frame(kPlot, x, y);
  const double x_step = nice_step(x.max - x.min, kTicks), y_step = nice_step(y.max - y.min, kTicks);
  c.y_axis(kPlot, y, nice_ticks(y.min, y.max, kTicks), y_step, chart.y_axis.text());
  c.x_axis(kPlot, x, nice_ticks(x.min, x.max, kTicks), x_step, chart.x_axis.text());
  if (!any) c.no_samples(kPlot);

  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < series.size(); ++i) {
    const auto colour = palette(i);
    std::vector<std::pair<double, double>> px;
    for (const auto& [vx, vy] : series[i].points)
      px.emplace_back(x.map(vx, kPlot.x, kPlot.right()), y.map(vy, kPlot.bottom(), kPlot.y));
    if (!px.empty()) c.polyline(px, colour, series[i].name);
    // A single point is no line; mark it so it stays visible.
    if (px.size() == 1) c.circle(px[0].first, px[0].second, 3, colour);
    legend.push_back(LegendEntry{series[i].name, colour, LegendEntry::Mark::line});
  }
  c.legend(kPlot.right() + 18, kPlot.y + 10, legend, kLegendChars);
  return c.finish();
}

}  // namespace kvrt::report::svg
