#pragma once
// The three chart kinds report.md embeds: a line chart
// (utilisation over time), a horizontal bar chart (the reuse funnel) and
// histograms on a log axis (receipt latency per owner). Each renders a
// complete, well-formed SVG document: title, axes with tick labels and units,
// legend, all text escaped; a chart without data still renders, saying
// "no samples". Coordinates follow the convention of svg_canvas.hpp, and the
// data elements carry their values:
//   line chart  <polyline class="series" data-series="name" points="x,y ...">
//   bar chart   <rect class="bar" data-label="..." data-value="v" ...>, the
//               value axis runs from 0 to the largest value, so the largest
//               bar spans the whole plot width
//   histogram   one plot area per panel; <rect class="bar" data-panel="i"
//               data-bin="k" data-count="c" ...>, the count axis runs from 0
//               to the panel's largest count
// Non-finite values are not data: such points are left out.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvrt::report::svg {

struct AxisTitle {
  std::string label;  // what is measured, e.g. "time since the workers started"
  std::string unit;   // e.g. "s"; printed as "label [unit]"
  std::string text() const { return unit.empty() ? label : label + " [" + unit + "]"; }
};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y) in axis units
};

struct LineChart {
  std::string title;
  AxisTitle x_axis, y_axis;
  std::vector<Series> series;
  bool x_from_zero = true;  // the x axis starts at 0 (or below, if a point does)
};

struct Bar {
  std::string label;
  double value = 0;
  std::string note;       // printed after the value, e.g. "−2 index_miss"
  bool emphasis = false;  // drawn in the second colour (legend: emphasis_name)
};

struct BarChart {
  std::string title;
  AxisTitle value_axis;
  std::vector<Bar> bars;      // top to bottom
  std::string bar_name;       // legend for plain bars
  std::string emphasis_name;  // legend for emphasised bars (shown if any is)
};

struct HistogramMarker {
  std::string name;  // e.g. "p50"
  double x = 0;      // in x-axis units
};

struct HistogramPanel {
  std::string title;
  std::vector<uint64_t> counts;  // one per bin, or empty for "no samples"
  std::vector<HistogramMarker> markers;
};

struct Histogram {
  std::string title;
  AxisTitle x_axis, y_axis;
  std::vector<double> edges;  // bin k is [edges[k], edges[k+1]); > 0, increasing, drawn on a log10 axis
  std::vector<HistogramPanel> panels;
};

std::string render_line_chart(const LineChart& chart);
std::string render_bar_chart(const BarChart& chart);
std::string render_histogram(const Histogram& chart);

}  // namespace kvrt::report::svg
