#pragma once
// Prometheus text exposition format 0.0.4, written by hand: a family is its
// `# HELP` and `# TYPE` lines followed by its samples, one per label set.
// Every label passes the 0x0CE hygiene rules (validate_metric_labels) here,
// where metrics are made, so that no exporter of kvrt can put a prompt, a
// token list or an unsalted cache key on a scrape: the sample is refused and
// the exposition stays as it was.
//
// Names follow Prometheus's conventions, which promtool's linter checks:
// [a-zA-Z_:][a-zA-Z0-9_:]*, counters end in _total, and the unit is the
// name's last word before it (_seconds, _bytes, _blocks, _tokens, _ratio).
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"
#include "services/telemetry/metric_label_hygiene.hpp"

namespace kvrt::metrics {

enum class MetricType : uint8_t { counter = 0, gauge = 1, histogram = 2 };
std::string_view to_string(MetricType t);

// One histogram's state: counts per bucket (not cumulative), the last one
// past the largest bound (+Inf); the exposition writes them cumulative.
struct HistogramValue {
  std::vector<double> upper_bounds;     // finite and increasing [the family's unit]
  std::vector<uint64_t> bucket_counts;  // upper_bounds.size() + 1 entries [observations]
  double sum = 0;                       // of the observations [the family's unit]
};

class PrometheusExposition {
 public:
  // Starts a family; the samples that follow belong to it. Errors
  // (invalid_argument, the exposition unchanged): a malformed or repeated
  // name, a counter whose name does not end in _total, no help text.
  Status family(std::string_view name, MetricType type, std::string_view help);

  // A sample of the current counter or gauge family. Errors, the exposition
  // unchanged: telemetry_forbidden_label (0x0CE), invalid_argument (no
  // family yet, a histogram family, a label set given twice, a reserved
  // label name, a counter that is negative or not finite).
  Status sample(std::span<const MetricLabel> labels, double value);
  Status sample(double value) { return sample({}, value); }

  // A histogram of the current histogram family: its _bucket series (with
  // le), _sum and _count. Errors as sample(), and invalid_argument when the
  // bounds are not finite and increasing or the counts do not fit them.
  Status histogram(std::span<const MetricLabel> labels, const HistogramValue& value);

  const std::string& text() const { return text_; }

 private:
  Status check_labels(std::span<const MetricLabel> labels);

  std::string text_;
  std::set<std::string, std::less<>> families_;
  std::string current_;  // the current family's name
  MetricType type_ = MetricType::gauge;
  std::set<std::string> label_sets_;  // of the current family, serialised
};

}  // namespace kvrt::metrics
