#pragma once
// The pieces write_report() assembles, each a pure function of the
// report so that tests can check a piece without touching the file system.
#include <nlohmann/json.hpp>
#include <string>

#include "tools/report/run_report.hpp"

namespace kvrt::report {

// report.json: summary_json plus "timeline" (every sample, with its 0x02
// ledger) and "latency" extended by a log-binned histogram per owner.
nlohmann::json report_document(const RunReport& report);
// report.md: readable as plain Markdown; embeds the three plots by file name.
std::string render_markdown(const RunReport& report);
// utilisation.svg: used, evictable and capacity blocks over time.
std::string render_utilisation_svg(const RunReport& report);
// funnel.svg: attempts reaching each 0x0CF stage, labelled with the bucket
// that lost the difference.
std::string render_funnel_svg(const RunReport& report);
// latency.svg: per-owner histograms of receipt latency on log-scaled bins.
std::string render_latency_svg(const RunReport& report);

inline constexpr const char* kReportJson = "report.json";
inline constexpr const char* kReportMarkdown = "report.md";
inline constexpr const char* kUtilisationSvg = "utilisation.svg";
inline constexpr const char* kFunnelSvg = "funnel.svg";
inline constexpr const char* kLatencySvg = "latency.svg";

}  // namespace kvrt::report
