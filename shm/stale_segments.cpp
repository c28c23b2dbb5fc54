#include "shm/stale_segments.hpp"

#include <algorithm>
#include <filesystem>

namespace kvrt::shm {

Result<std::vector<std::string>> list_pool_segments() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kShmDirectory, ec)) {
    const std::string n = entry.path().filename().string();
    if (n.starts_with("kvrt.")) names.push_back(n);
  }
  if (ec) return make_error(ErrorCode::io, std::string("cannot list ") + kShmDirectory + ": " + ec.message(), "dir");
  std::sort(names.begin(), names.end());
  return names;
}

Result<SegmentSweep> remove_stale_pool_segments() {
  std::vector<std::string> names;
  KVRT_TRY_ASSIGN(names, list_pool_segments());
  SegmentSweep sweep;
  for (const std::string& n : names) {
    SegmentSweepRow row{n, std::nullopt, std::nullopt, false};
    Result<BlockPoolSegment::StaleRemoval> r = BlockPoolSegment::remove_if_stale("/" + n);
    if (r.ok()) {
      row.found = r->found;
      row.removed = r->removed;
      if (r->removed) {
        ++sweep.removed;
        sweep.removed_bytes += r->found.file_bytes;
      }
    } else {
      row.kept_because = r.error();
    }
    sweep.rows.push_back(std::move(row));
  }
  return sweep;
}

}  // namespace kvrt::shm
