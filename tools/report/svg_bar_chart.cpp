// Horizontal bar chart of svg_plot.hpp: one bar per entry, top to bottom, on
// a value axis from 0 to the largest value (the largest bar spans the plot).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/report/report_format.hpp"
#include "tools/report/svg_canvas.hpp"
#include "tools/report/svg_plot.hpp"

namespace kvrt::report::svg {
namespace {
constexpr double kWidth = 760, kTop = 56;                               // [px]
constexpr double kBarHeight = 20, kGap = 10;                            // [px]
constexpr double kValueRoom = 210;                                      // right of the plot: value and note [px]
constexpr size_t kLabelChars = 30, kNoteChars = 28, kLegendChars = 60;  // legend below the plot
constexpr int kTicks = 5;

std::string value_text(double v) {
  char buf[48];
  // Counts are integers; print them without a fraction.
  if (std::fabs(v) < 1e15 && v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string full_precision(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

std::string render_bar_chart(const BarChart& chart) {
  std::vector<Bar> bars;
  for (const auto& b : chart.bars)
    if (std::isfinite(b.value)) bars.push_back(b);
  double max_value = 0;
  size_t label_chars = 0;
  bool any_emphasis = false;
  for (auto& b : bars) {
    max_value = std::max(max_value, b.value);
    b.label = truncate_text(printable(b.label), kLabelChars);
    b.note = truncate_text(printable(b.note), kNoteChars);
    label_chars = std::max(label_chars, b.label.size());  // bytes >= characters: a safe upper bound
    any_emphasis = any_emphasis || b.emphasis;
  }
  const double left = std::clamp(16.0 + 7.0 * static_cast<double>(label_chars), 90.0, 240.0);
  const double rows = static_cast<double>(bars.size());
  const Area plot{left, kTop, kWidth - left - kValueRoom, std::max(60.0, rows * (kBarHeight + kGap) + kGap)};
  const Domain x{0, max_value > 0 ? max_value : 1, false};
  const Domain y{0, 1, false};  // categories: the y axis carries no values
  const size_t legend_rows = any_emphasis ? 2 : 1;
  const double height = plot.bottom() + 56 + 18.0 * static_cast<double>(legend_rows) + 8;

  Canvas c(kWidth, height, chart.title);
  c.frame(plot, x, y);
  c.x_axis(plot, x, nice_ticks(x.min, x.max, kTicks), nice_step(x.max - x.min, kTicks), chart.value_axis.text());
  if (bars.empty()) c.no_samples(plot);
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    const double top = plot.y + kGap + static_cast<double>(i) * (kBarHeight + kGap);
    const double end = x.map(b.value, plot.x, plot.right());
    const std::string data =
        "data-label=\"" + escape_xml(b.label) + "\" data-value=\"" + full_precision(b.value) + "\"";
    c.rect(Area{plot.x, top, end - plot.x, kBarHeight}, b.emphasis ? palette(3) : palette(0), "bar", data);
    c.text(plot.x - 8, top + 14, b.label, "bar-label", "end", 11);
    const std::string value = b.note.empty() ? value_text(b.value) : value_text(b.value) + "  " + b.note;
    c.text(end + 6, top + 14, value, "bar-value", "start", 11);
  }
  std::vector<LegendEntry> legend{{chart.bar_name, palette(0), LegendEntry::Mark::swatch}};
  if (any_emphasis) legend.push_back({chart.emphasis_name, palette(3), LegendEntry::Mark::swatch});
  c.legend(plot.x, plot.bottom() + 60, legend, kLegendChars);
  return c.finish();
}

}  // namespace kvrt::report::svg
