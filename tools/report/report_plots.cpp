// The three plots of report.md, built from a RunReport with the
// chart kinds of svg_plot.hpp.
#include <string>

#include "tools/report/report_facts.hpp"
#include "tools/report/report_format.hpp"
#include "tools/report/report_latency.hpp"
#include "tools/report/report_render.hpp"
#include "tools/report/svg_plot.hpp"

namespace kvrt::report {

std::string render_utilisation_svg(const RunReport& r) {
  // Block counts summed over cache groups, as the node samples them: used
  // (live + in transaction), evictable (cached, unreferenced) and capacity.
  // Their gap is free blocks (0x0CF reconciliation: pool = free + evictable +
  // live + reserved/copying).
  svg::LineChart chart{"Pool utilisation over time (0x02C, 0x0CF)",
                       {"time since the workers started", "s"},
                       {"blocks, summed over cache groups", "blocks"},
                       {{"used (live + in transaction)", {}}, {"evictable (cached)", {}}, {"capacity", {}}},
                       true};
  for (const auto& s : r.timeline) {
    chart.series[0].points.emplace_back(s.t_s, static_cast<double>(s.used_blocks));
    chart.series[1].points.emplace_back(s.t_s, static_cast<double>(s.evictable_blocks));
    chart.series[2].points.emplace_back(s.t_s, static_cast<double>(s.capacity_blocks));
  }
  return svg::render_line_chart(chart);
}

std::string render_funnel_svg(const RunReport& r) {
  // One bar per stage in funnel order. Where stages and buckets line up as in
  // 0x0CF, the bar of stage b + 1 names the bucket that lost the difference
  // from stage b; buckets that do not line up become bars of their own.
  svg::BarChart chart{"Reuse funnel (0x0CF): attempts reaching each stage",
                      {"reuse attempts", ""},
                      {},
                      "attempts reaching the stage",
                      "rejected in a bucket (no stage to label)"};
  for (const auto& [name, count] : r.funnel_stages)
    chart.bars.push_back(svg::Bar{name, static_cast<double>(count), "", false});
  for (size_t b = 0; b < r.rejection_buckets.size(); ++b) {
    const auto& [name, count] = r.rejection_buckets[b];
    if (auto stage = stage_after_bucket(r, b))
      chart.bars[*stage].note = "\u2212" + std::to_string(count) + " " + name;
    else
      chart.bars.push_back(svg::Bar{"rejected: " + name, static_cast<double>(count), "", true});
  }
  return svg::render_bar_chart(chart);
}

std::string render_latency_svg(const RunReport& r) {
  const auto owners = merge_owners(r.latencies);
  const LatencyBins bins = latency_bins(owners);
  svg::Histogram chart{"Receipt latency per owner (log-scaled bins)",
                       {"receipt latency seen by workers", "\u00b5s"},
                       {"calls per bin", ""},
                       bins.edges_us,
                       {}};
  for (const auto& owner : owners) {
    const OwnerLatencySummary s = summarise(owner);
    std::vector<svg::HistogramMarker> markers;
    if (s.measured > 0) markers = {{"p50", s.p50_us}, {"p99", s.p99_us}};
    chart.panels.push_back(svg::HistogramPanel{printable(s.owner) + " \u2014 " + std::to_string(s.calls) +
                                                   " calls, p50 " + fixed(s.p50_us, 2) + " \u00b5s, p99 " +
                                                   fixed(s.p99_us, 2) + " \u00b5s",
                                               bin_counts(owner.samples_us, bins), std::move(markers)});
  }
  return svg::render_histogram(chart);
}

}  // namespace kvrt::report
