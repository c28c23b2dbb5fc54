// `kvrt segments [--remove-stale] [--json]`: the kvrt pool segments in
// /dev/shm and who owns them. A node removes its segments when it shuts down;
// one killed with SIGKILL (or a `kvrt run` killed that way) cannot, and its
// segments keep their memory until someone unlinks them, or until a node
// starts on the same host (it sweeps the same way). `--remove-stale` unlinks
// exactly those whose recorded owner is gone (shm/stale_segments.hpp).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"
#include "shm/stale_segments.hpp"

namespace kvrt::app {
namespace {

struct SegmentsOptions {
  bool remove_stale = false;
  bool json = false;
};

struct SegmentRow {
  std::string name;
  std::string owner = "-";  // pid, or "none recorded"
  std::string state = "-";  // alive, exited, pid_reused; or what stopped the inspection
  std::string generation = "-";
  uint64_t bytes = 0;
  bool removed = false;
};

SegmentRow row_for(const std::string& file_name, const Result<shm::SegmentInspection>& inspected, bool removed,
                   const char* failure) {
  SegmentRow row;
  row.name = file_name;
  row.removed = removed;
  if (!inspected.ok()) {
    row.state = std::string(failure) + inspected.error().describe();
    return row;
  }
  const shm::SegmentInspection& found = *inspected;
  row.bytes = found.file_bytes;
  if (!found.owner_recorded) {
    row.owner = "none recorded";
    row.state = "starting or died creating it";
  } else {
    row.owner = std::to_string(found.owner.pid);
    row.state = std::string(to_string(found.owner_state));
  }
  if (found.pool_generation) row.generation = std::to_string(found.pool_generation->value);
  return row;
}

Result<std::vector<SegmentRow>> segment_rows(bool remove_stale) {
  std::vector<SegmentRow> rows;
  if (remove_stale) {
    shm::SegmentSweep sweep;
    KVRT_TRY_ASSIGN(sweep, shm::remove_stale_pool_segments());
    for (const shm::SegmentSweepRow& r : sweep.rows)
      rows.push_back(row_for(
          r.name, r.found ? Result<shm::SegmentInspection>(*r.found) : Result<shm::SegmentInspection>(*r.kept_because),
          r.removed, "kept: "));
    return rows;
  }
  std::vector<std::string> names;
  KVRT_TRY_ASSIGN(names, shm::list_pool_segments());
  for (const std::string& n : names)
    rows.push_back(row_for(n, shm::BlockPoolSegment::inspect("/" + n), false, "unreadable: "));
  return rows;
}

int run_segments(const SegmentsOptions& o) {
  Result<std::vector<SegmentRow>> listed = segment_rows(o.remove_stale);
  if (!listed.ok()) return report_error("segments", listed.error());
  const std::vector<SegmentRow>& rows = *listed;
  const auto removed = std::count_if(rows.begin(), rows.end(), [](const SegmentRow& r) { return r.removed; });
  if (o.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const SegmentRow& r : rows)
      list.push_back({{"name", r.name},
                      {"owner_pid", r.owner},
                      {"owner_state", r.state},
                      {"pool_generation", r.generation},
                      {"bytes", r.bytes},
                      {"removed", r.removed}});
    std::cout << nlohmann::json{{"segments", list}, {"removed", removed}}.dump(2) << "\n";
    return 0;
  }
  for (const SegmentRow& r : rows)
    std::cout << r.name << "  owner " << r.owner << " (" << r.state << ")  generation " << r.generation << "  "
              << r.bytes << " bytes" << (r.removed ? "  REMOVED" : "") << "\n";
  std::cout << rows.size() << " kvrt segment(s) in " << shm::kShmDirectory;
  if (o.remove_stale) std::cout << ", " << removed << " stale removed";
  std::cout << "\n";
  return 0;
}

const SubcommandRegistration kRegistration{
    "segments", [](CLI::App& parent) {
      auto opts = std::make_shared<SegmentsOptions>();
      auto* sub = parent.add_subcommand("segments",
                                        "List kvrt pool segments in /dev/shm and their owners; "
                                        "--remove-stale unlinks those whose owner is gone");
      sub->add_flag("--remove-stale", opts->remove_stale,
                    "unlink segments whose recorded owner has exited (or whose pid was reused)");
      sub->add_flag("--json", opts->json, "print one JSON object");
      return [opts] { return run_segments(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
