// write_report: renders report.json, report.md and the three SVG
// plots, then writes them into the report directory. Rendering cannot fail,
// so it happens first; writing is two phases (every file to a temporary name,
// then each renamed into place) so that a full disk or a bad path leaves any
// earlier report in that directory whole, and every failure is an io error
// naming the path, never a silently missing file.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tools/report/report_render.hpp"

namespace kvrt::report {
namespace {
namespace fs = std::filesystem;

struct PendingFile {
  fs::path path;       // final name
  fs::path temporary;  // written first, renamed onto path
  std::string content;
};

Error io_error(const fs::path& path, const std::string& what, const std::string& why) {
  return make_error(ErrorCode::io, what + " " + path.string() + ": " + why, path.string());
}

Status write_temporary(const PendingFile& f) {
  std::ofstream out(f.temporary, std::ios::binary | std::ios::trunc);
  if (!out) return io_error(f.path, "cannot create report file", std::strerror(errno));
  out.write(f.content.data(), static_cast<std::streamsize>(f.content.size()));
  out.flush();
  if (!out) return io_error(f.path, "cannot write report file", std::strerror(errno));
  out.close();
  if (out.fail()) return io_error(f.path, "cannot close report file", std::strerror(errno));
  return Status::success();
}

void remove_temporaries(const std::vector<PendingFile>& files) {
  std::error_code ignored;  // best effort: the error being reported is the one that matters
  for (const auto& f : files) fs::remove(f.temporary, ignored);
}

}  // namespace

Status write_report(const RunReport& report, const std::string& dir) {
  if (dir.empty()) return make_error(ErrorCode::invalid_argument, "report directory is empty", "dir");
  const fs::path root(dir);
  const std::vector<std::pair<const char*, std::string>> rendered = {
      // Strings are already valid UTF-8 (sanitize_utf8); replace is a second line of defence.
      {kReportJson, report_document(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"},
      {kReportMarkdown, render_markdown(report)},
      {kUtilisationSvg, render_utilisation_svg(report)},
      {kFunnelSvg, render_funnel_svg(report)},
      {kLatencySvg, render_latency_svg(report)},
  };

  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return io_error(root, "cannot create report directory", ec.message());
  if (!fs::is_directory(root, ec)) return io_error(root, "report path is not a directory", "exists as another file");

  std::vector<PendingFile> files;
  for (const auto& [name, content] : rendered)
    files.push_back(PendingFile{root / name, root / std::string(".").append(name).append(".tmp"), content});
  for (const auto& f : files) {
    if (Status s = write_temporary(f); !s.ok()) {
      remove_temporaries(files);
      return s;
    }
  }
  for (const auto& f : files) {
    fs::rename(f.temporary, f.path, ec);
    if (ec) {
      remove_temporaries(files);
      return io_error(f.path, "cannot move report file into place", ec.message());
    }
  }
  return Status::success();
}

}  // namespace kvrt::report
