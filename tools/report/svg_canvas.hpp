#pragma once
// The low-level half of the report's SVG writer: a document being
// written, escaped text, axes with tick labels and units, legends and the
// plot-area frame. svg_plot.hpp builds the three chart kinds on top of it.
//
// Coordinate convention (shared with the tests, which read it back from the
// SVG): every plot draws
//   <rect class="plot-area" x y width height data-x-min data-x-max
//         data-y-min data-y-max data-x-scale="linear"|"log10"/>
// and a value v on the x axis lies at x + (s(v) - s(x-min)) / (s(x-max) -
// s(x-min)) * width, with s the identity or log10; a value on the y axis lies
// at y + height - (v - y-min) / (y-max - y-min) * height (y grows downwards).
#include <string>
#include <string_view>
#include <vector>

namespace kvrt::report::svg {

// printable() (valid UTF-8, no control characters), then the five XML
// special characters as entities, so any string is safe as text or attribute.
std::string escape_xml(std::string_view text);
// At most max_chars characters (code points) of a printable string; longer
// ones end in "…" so a label cannot run over its neighbour.
std::string truncate_text(std::string_view printable_text, size_t max_chars);
// A coordinate or value for an attribute: fixed, two decimals, "0" for NaN.
std::string num(double value);

struct Area {
  double x = 0, y = 0, width = 0, height = 0;  // [px]
  double right() const { return x + width; }
  double bottom() const { return y + height; }
};

struct Domain {
  double min = 0, max = 1;  // data units; for log10 the raw values (> 0), not their logs
  bool log10 = false;
  // Pixel position of v on [from, to]; values outside the domain are clamped.
  double map(double v, double from, double to) const;
};

// Ticks at multiples of a 1-2-5 step inside [min, max], about `target` of them.
std::vector<double> nice_ticks(double min, double max, int target);
// The step nice_ticks uses, and the smallest multiple of it >= max (for a
// y axis that should end on a labelled tick).
double nice_step(double span, int target);
double nice_ceiling(double max, int target);
std::string tick_label(double value, double step);

// A colour for series i (categorical, readable on white).
std::string_view palette(size_t i);

struct LegendEntry {
  std::string name;
  std::string_view colour;
  enum class Mark { swatch, line, dashed_line } mark = Mark::swatch;
};

class Canvas {
 public:
  // Writes the XML declaration, the <svg> root, <title>, a white background
  // and the visible title.
  Canvas(double width, double height, std::string_view title);

  void text(double x, double y, std::string_view content, std::string_view css_class, std::string_view anchor = "start",
            double font_size = 12);
  void line(double x1, double y1, double x2, double y2, std::string_view colour, std::string_view css_class,
            bool dashed = false);
  // `data` is extra attributes, already escaped (e.g. data-value="3").
  void rect(const Area& a, std::string_view fill, std::string_view css_class, std::string_view data = {});
  void polyline(const std::vector<std::pair<double, double>>& points_px, std::string_view colour,
                std::string_view series_name);
  void circle(double cx, double cy, double r, std::string_view colour);

  // The plot-area frame with its data attributes (see the convention above).
  void frame(const Area& a, const Domain& x, const Domain& y);
  void x_axis(const Area& a, const Domain& x, const std::vector<double>& ticks, double step, std::string_view label);
  void y_axis(const Area& a, const Domain& y, const std::vector<double>& ticks, double step, std::string_view label);
  // Entries one below the other from (x, y); names cut at max_chars characters.
  void legend(double x, double y, const std::vector<LegendEntry>& entries, size_t max_chars);
  // "no samples" in the middle of an empty plot.
  void no_samples(const Area& a);

  std::string finish();

 private:
  std::string out_;
};

}  // namespace kvrt::report::svg
