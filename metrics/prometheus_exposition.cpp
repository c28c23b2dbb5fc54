// The text exposition writer: name, label and value rules of the Prometheus
// text format 0.0.4, and label hygiene (0x0CE) before any sample is written.
#include "metrics/prometheus_exposition.hpp"

#include <charconv>
#include <cmath>

namespace kvrt::metrics {

namespace {

bool is_metric_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// A finite value as Prometheus's own clients print it: integers without a
// fraction, others with enough digits to read back the same double.
void append_value(std::string& out, double v) {
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  char buf[32];
  const bool integral = v == std::trunc(v) && std::fabs(v) < 9.007199254740992e15;
  const auto r = integral ? std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v))
                          : std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Label values escape backslash, double quote and line feed; help text
// escapes backslash and line feed (the format's two escaping rules).
void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (const char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
}

void append_labels(std::string& out, std::span<const MetricLabel> labels, const MetricLabel* extra = nullptr) {
  if (labels.empty() && !extra) return;
  out += '{';
  bool first = true;
  auto one = [&](const MetricLabel& l) {
    if (!first) out += ',';
    first = false;
    out += l.key;
    out += "=\"";
    append_escaped(out, l.value, true);
    out += '"';
  };
  for (const MetricLabel& l : labels) one(l);
  if (extra) one(*extra);
  out += '}';
}

std::string serialise(std::span<const MetricLabel> labels) {
  std::string s;
  append_labels(s, labels);
  return s;
}

}  // namespace

std::string_view to_string(MetricType t) {
  switch (t) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "untyped";
}

Status PrometheusExposition::family(std::string_view name, MetricType type, std::string_view help) {
  if (!is_metric_name(name) || name.starts_with("__"))
    return make_error(ErrorCode::invalid_argument, "a metric name is [a-zA-Z_:][a-zA-Z0-9_:]*, not reserved", "name");
  if (families_.contains(name))
    return make_error(ErrorCode::invalid_argument, "metric family " + std::string(name) + " is written twice", "name");
  if (type == MetricType::counter && !name.ends_with("_total"))
    return make_error(ErrorCode::invalid_argument, "counter " + std::string(name) + " must end in _total", "name");
  if (help.empty())
    return make_error(ErrorCode::invalid_argument, "metric family " + std::string(name) + " has no help text", "help");
  families_.emplace(name);
  current_ = std::string(name);
  type_ = type;
  label_sets_.clear();
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  append_escaped(text_, help, false);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += to_string(type);
  text_ += '\n';
  return Status::success();
}

Status PrometheusExposition::check_labels(std::span<const MetricLabel> labels) {
  KVRT_TRY(validate_metric_labels(labels));
  std::set<std::string_view> keys;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& k = labels[i].key;
    if (k.starts_with("__") || (type_ == MetricType::histogram && k == "le"))
      return make_error(ErrorCode::invalid_argument, "label name " + k + " is reserved", k);
    if (!keys.insert(k).second) return make_error(ErrorCode::invalid_argument, "label " + k + " is given twice", k);
  }
  if (label_sets_.contains(serialise(labels)))
    return make_error(ErrorCode::invalid_argument, "family " + current_ + " already has a sample with these labels",
                      "labels");
  return Status::success();
}

Status PrometheusExposition::sample(std::span<const MetricLabel> labels, double value) {
  if (current_.empty()) return make_error(ErrorCode::invalid_argument, "a sample needs a family first", "family");
  if (type_ == MetricType::histogram)
    return make_error(ErrorCode::invalid_argument, "family " + current_ + " is a histogram", "family");
  KVRT_TRY(check_labels(labels));
  if (type_ == MetricType::counter && !(std::isfinite(value) && value >= 0))
    return make_error(ErrorCode::invalid_argument, "counter " + current_ + " must be finite and not negative", "value");
  label_sets_.insert(serialise(labels));
  text_ += current_;
  append_labels(text_, labels);
  text_ += ' ';
  append_value(text_, value);
  text_ += '\n';
  return Status::success();
}

Status PrometheusExposition::histogram(std::span<const MetricLabel> labels, const HistogramValue& value) {
  if (current_.empty()) return make_error(ErrorCode::invalid_argument, "a sample needs a family first", "family");
  if (type_ != MetricType::histogram)
    return make_error(ErrorCode::invalid_argument, "family " + current_ + " is not a histogram", "family");
  KVRT_TRY(check_labels(labels));
  if (value.bucket_counts.size() != value.upper_bounds.size() + 1)
    return make_error(ErrorCode::invalid_argument, "a histogram has one count per bound and one past the last",
                      "bucket_counts");
  for (size_t i = 0; i < value.upper_bounds.size(); ++i)
    if (!std::isfinite(value.upper_bounds[i]) || (i > 0 && value.upper_bounds[i] <= value.upper_bounds[i - 1]))
      return make_error(ErrorCode::invalid_argument, "histogram bounds must be finite and increasing", "upper_bounds");
  label_sets_.insert(serialise(labels));
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= value.upper_bounds.size(); ++i) {
    cumulative += value.bucket_counts[i];
    std::string le;
    append_value(le, i < value.upper_bounds.size() ? value.upper_bounds[i] : INFINITY);
    const MetricLabel bound{"le", le};
    text_ += current_;
    text_ += "_bucket";
    append_labels(text_, labels, &bound);
    text_ += ' ';
    append_value(text_, static_cast<double>(cumulative));
    text_ += '\n';
  }
  text_ += current_;
  text_ += "_sum";
  append_labels(text_, labels);
  text_ += ' ';
  append_value(text_, value.sum);
  text_ += '\n';
  text_ += current_;
  text_ += "_count";
  append_labels(text_, labels);
  text_ += ' ';
  append_value(text_, static_cast<double>(cumulative));
  text_ += '\n';
  return Status::success();
}

}  // namespace kvrt::metrics
