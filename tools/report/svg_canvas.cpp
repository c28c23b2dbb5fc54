#include "tools/report/svg_canvas.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/report/report_format.hpp"

namespace kvrt::report::svg {

std::string escape_xml(std::string_view text) {
  const std::string clean = printable(text);
  std::string out;
  out.reserve(clean.size());
  for (char c : clean) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string truncate_text(std::string_view text, size_t max_chars) {
  std::vector<size_t> starts;  // byte offset of every character (non-continuation byte)
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  if (starts.size() <= max_chars) return std::string(text);
  if (max_chars == 0) return {};
  // Keep max_chars - 1 characters and the ellipsis: max_chars in all.
  return std::string(text.substr(0, starts[max_chars - 1])) + "\u2026";
}

std::string num(double value) {
  if (!std::isfinite(value)) return "0";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

double Domain::map(double v, double from, double to) const {
  double lo = min, hi = max, x = v;
  if (log10) {
    lo = std::log10(lo), hi = std::log10(hi);
    x = x > 0 ? std::log10(x) : lo;
  }
  if (!(hi > lo)) return from;
  const double t = std::clamp((x - lo) / (hi - lo), 0.0, 1.0);
  return from + t * (to - from);
}

double nice_step(double span, int target) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

double nice_ceiling(double max, int target) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double step = nice_step(max, target);
  return std::ceil(max / step) * step;
}

std::vector<double> nice_ticks(double min, double max, int target) {
  std::vector<double> ticks;
  if (!(max > min) || !std::isfinite(min) || !std::isfinite(max)) return ticks;
  const double step = nice_step(max - min, target);
  // Tick k is k * step, not an accumulated sum, so 0.1 + 0.1 + 0.1 drift
  // cannot push the last tick out of the domain. The count is an integer:
  // far from zero (1e17 + 0 .. 1e17 + 10) k + 1 == k in doubles, and a loop
  // over k would never end.
  const double first = std::ceil(min / step), last = std::floor(max / step + 1e-9);
  if (!(last - first >= 0 && last - first < 1000)) return ticks;
  const int count = static_cast<int>(last - first) + 1;
  // A step below 1 is 10^-d, 2 * 10^-d or 5 * 10^-d, whose inverse is an
  // integer: k / inverse is the correctly rounded decimal (3 / 10 == 0.3,
  // where 3 * 0.1 is 0.30000000000000004).
  const double inverse = step < 1 ? std::round(1 / step) : 0;
  for (int i = 0; i < count; ++i) {
    const double t = inverse > 0 ? (first + i) / inverse : (first + i) * step;
    if (t >= min && t <= max + step * 1e-9) ticks.push_back(t);
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  char buf[48];
  if (std::fabs(value) >= 1e7) {
    std::snprintf(buf, sizeof buf, "%.3g", value);
  } else if (step >= 1) {
    std::snprintf(buf, sizeof buf, "%.0f", value);
  } else {
    const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 12);
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  }
  return buf;
}

std::string_view palette(size_t i) {
  static constexpr std::string_view kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  return kColours[i % std::size(kColours)];
}

Canvas::Canvas(double width, double height, std::string_view title) {
  out_ += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
          "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"sans-serif\">\n";
  out_ += "<title>" + escape_xml(title) + "</title>\n";
  rect(Area{0, 0, width, height}, "#ffffff", "background");
  text(width / 2, 24, title, "title", "middle", 15);
}

void Canvas::text(double x, double y, std::string_view content, std::string_view css_class, std::string_view anchor,
                  double font_size) {
  out_ += "<text class=\"" + std::string(css_class) + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" +
          std::string(anchor) + "\" font-size=\"" + num(font_size) + "\">" + escape_xml(content) + "</text>\n";
}

void Canvas::line(double x1, double y1, double x2, double y2, std::string_view colour, std::string_view css_class,
                  bool dashed) {
  out_ += "<line class=\"" + std::string(css_class) + "\" x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" +
          num(x2) + "\" y2=\"" + num(y2) + "\" stroke=\"" + std::string(colour) + "\" stroke-width=\"1\"" +
          (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
}

void Canvas::rect(const Area& a, std::string_view fill, std::string_view css_class, std::string_view data) {
  out_ += "<rect class=\"" + std::string(css_class) + "\" x=\"" + num(a.x) + "\" y=\"" + num(a.y) + "\" width=\"" +
          num(std::max(a.width, 0.0)) + "\" height=\"" + num(std::max(a.height, 0.0)) + "\" fill=\"" +
          std::string(fill) + "\"";
  if (!data.empty()) out_.append(" ").append(data);
  out_ += "/>\n";
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& points_px, std::string_view colour,
                      std::string_view series_name) {
  out_ += "<polyline class=\"series\" data-series=\"" + escape_xml(series_name) + "\" fill=\"none\" stroke=\"" +
          std::string(colour) + "\" stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < points_px.size(); ++i) {
    if (i) out_ += ' ';
    out_.append(num(points_px[i].first)).append(",").append(num(points_px[i].second));
  }
  out_ += "\"/>\n";
}

void Canvas::circle(double cx, double cy, double r, std::string_view colour) {
  out_ += "<circle class=\"point\" cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" +
          std::string(colour) + "\"/>\n";
}

void Canvas::frame(const Area& a, const Domain& x, const Domain& y) {
  // The data attributes carry the domain at full precision (%.17g), so a
  // reader can map values back without the rounding of the tick labels.
  const auto full = [](double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.17g", std::isfinite(v) ? v : 0.0);
    return std::string(buf);
  };
  out_ += "<rect class=\"plot-area\" x=\"" + num(a.x) + "\" y=\"" + num(a.y) + "\" width=\"" + num(a.width) +
          "\" height=\"" + num(a.height) + "\" fill=\"none\" stroke=\"#999999\" data-x-min=\"" + full(x.min) +
          "\" data-x-max=\"" + full(x.max) + "\" data-y-min=\"" + full(y.min) + "\" data-y-max=\"" + full(y.max) +
          "\" data-x-scale=\"" + (x.log10 ? "log10" : "linear") + "\"/>\n";
}

void Canvas::x_axis(const Area& a, const Domain& x, const std::vector<double>& ticks, double step,
                    std::string_view label) {
  line(a.x, a.bottom(), a.right(), a.bottom(), "#333333", "axis");
  for (double t : ticks) {
    const double px = x.map(t, a.x, a.right());
    line(px, a.bottom(), px, a.bottom() + 5, "#333333", "tick");
    text(px, a.bottom() + 18, tick_label(t, step), "tick-label", "middle", 11);
  }
  text(a.x + a.width / 2, a.bottom() + 36, label, "axis-label", "middle");
}

void Canvas::y_axis(const Area& a, const Domain& y, const std::vector<double>& ticks, double step,
                    std::string_view label) {
  line(a.x, a.y, a.x, a.bottom(), "#333333", "axis");
  for (double t : ticks) {
    const double py = y.map(t, a.bottom(), a.y);
    line(a.x - 5, py, a.x, py, "#333333", "tick");
    line(a.x, py, a.right(), py, "#e5e5e5", "grid");
    text(a.x - 8, py + 4, tick_label(t, step), "tick-label", "end", 11);
  }
  text(a.x, a.y - 8, label, "axis-label", "start");
}

void Canvas::legend(double x, double y, const std::vector<LegendEntry>& entries, size_t max_chars) {
  out_ += "<g class=\"legend\">\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const double row = y + 18.0 * static_cast<double>(i);
    const auto& e = entries[i];
    if (e.mark == LegendEntry::Mark::swatch)
      rect(Area{x, row - 9, 12, 10}, e.colour, "legend-swatch");
    else
      line(x, row - 4, x + 14, row - 4, e.colour, "legend-line", e.mark == LegendEntry::Mark::dashed_line);
    text(x + 20, row, truncate_text(printable(e.name), max_chars), "legend-label", "start", 11);
  }
  out_ += "</g>\n";
}

void Canvas::no_samples(const Area& a) {
  text(a.x + a.width / 2, a.y + a.height / 2, "no samples", "no-samples", "middle", 14);
}

std::string Canvas::finish() {
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace kvrt::report::svg
