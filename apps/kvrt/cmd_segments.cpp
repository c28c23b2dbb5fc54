// `kvrt segments [--remove-stale] [--json]`: the kvrt pool segments in
// /dev/shm and who owns them. A node removes its segments when it shuts down;
// one killed with SIGKILL (or a `kvrt run` killed that way) cannot, and its
// segments keep their memory until someone unlinks them. `--remove-stale`
// unlinks exactly those whose recorded owner has exited or whose pid now
// belongs to a later process (BlockPoolSegment::remove_if_stale); a live
// owner's segment, one without an owner record and any other file are kept.
//
// Pids are local to a pid namespace: run this in the namespace of the nodes
// that created the segments (shm/process_identity.hpp).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/kvrt/subcommand_registry.hpp"
#include "shm/block_pool_segment.hpp"

namespace kvrt::app {
namespace {

constexpr const char* kShmDir = "/dev/shm";

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

SegmentRow row_for(const std::string& file_name, bool remove_stale) {
  SegmentRow row;
  row.name = file_name;
  const std::string name = "/" + file_name;
  shm::SegmentInspection found;
  if (remove_stale) {
    Result<shm::BlockPoolSegment::StaleRemoval> r = shm::BlockPoolSegment::remove_if_stale(name);
    if (!r.ok()) {
      row.state = "kept: " + r.error().describe();
      return row;
    }
    found = r->found;
    row.removed = r->removed;
  } else {
    Result<shm::SegmentInspection> r = shm::BlockPoolSegment::inspect(name);
    if (!r.ok()) {
      row.state = "unreadable: " + r.error().describe();
      return row;
    }
    found = *r;
  }
  row.bytes = found.file_bytes;
  if (!found.owner_recorded) {
    row.owner = "none recorded";
    row.state = "starting or died creating it";
  } else {
    row.owner = std::to_string(found.owner.pid);
    row.state = std::string(shm::to_string(found.owner_state));
  }
  if (found.pool_generation) row.generation = std::to_string(found.pool_generation->value);
  return row;
}

int run_segments(const SegmentsOptions& o) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kShmDir, ec)) {
    const std::string n = entry.path().filename().string();
    if (n.starts_with("kvrt.")) names.push_back(n);
  }
  if (ec)
    return report_error("segments",
                        make_error(ErrorCode::io, std::string("cannot list ") + kShmDir + ": " + ec.message(), "dir"));
  std::sort(names.begin(), names.end());
  std::vector<SegmentRow> rows;
  rows.reserve(names.size());
  for (const std::string& n : names) rows.push_back(row_for(n, o.remove_stale));
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
  std::cout << rows.size() << " kvrt segment(s) in " << kShmDir;
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
