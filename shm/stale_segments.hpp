#pragma once
// The pool segments a dead process left in /dev/shm. A node removes its
// segments when it shuts down; one killed with SIGKILL cannot, and its
// segments keep their memory until someone unlinks them. Both `kvrt segments
// --remove-stale` and a starting node (which reclaims what a killed
// predecessor left) sweep with remove_stale_pool_segments().
//
// Pids are local to a pid namespace: sweep in the namespace of the nodes that
// created the segments (services/common/process_identity.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "shm/block_pool_segment.hpp"

namespace kvrt::shm {

// Where shm_open(3) keeps its segments on Linux.
inline constexpr const char* kShmDirectory = "/dev/shm";

// Every kvrt pool segment there, sorted by name (file names, without the
// leading '/'). Errors: io when the directory cannot be listed.
Result<std::vector<std::string>> list_pool_segments();

struct SegmentSweepRow {
  std::string name;  // file name
  // The inspection when it succeeded (a segment being created right now, or
  // any file that is not a pool segment, cannot be inspected and is kept).
  std::optional<SegmentInspection> found;
  std::optional<Error> kept_because;
  bool removed = false;
};

struct SegmentSweep {
  std::vector<SegmentSweepRow> rows;
  uint64_t removed = 0;        // segments unlinked
  uint64_t removed_bytes = 0;  // their file sizes [bytes]
};

// Unlinks exactly the segments whose recorded owner has exited or whose pid
// now belongs to a later process (BlockPoolSegment::remove_if_stale); a live
// owner's segment, one without an owner record and any other file are kept.
Result<SegmentSweep> remove_stale_pool_segments();

}  // namespace kvrt::shm
