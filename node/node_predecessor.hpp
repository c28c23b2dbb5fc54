#pragma once
// What a starting node reclaims from a predecessor that died without cleaning
// up (SIGKILL, the OOM killer): a node removes its descriptor, token
// directory (tokens and sockets) and shared-memory segments when it shuts
// down, and a killed one leaves all three behind. Nothing of the dead node's
// cache survives (docs/operations.md, "When the node dies"): its segments are
// unlinked, not adopted, and the new node's pools take the next pool
// generation, so that a handle or receipt naming the old pools is refused as
// stale instead of aliasing a new block.
#include <cstdint>
#include <optional>
#include <string>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct PredecessorReclaim {
  std::optional<uint32_t> predecessor_pid;  // a dead node's descriptor was at the path
  bool token_dir_removed = false;           // its tokens and socket files
  uint64_t segments_removed = 0;            // stale pool segments of any dead owner on this host
  uint64_t segment_bytes_removed = 0;       // [bytes]
  PoolGeneration pool_generation{1};        // for the new node's pools: one past the predecessor's
};

// Errors: descriptor_in_use when a live node serves `descriptor_path` (it is
// left alone); io when a dead node's files cannot be removed. A descriptor
// that cannot be read is no predecessor (the new node overwrites it).
Result<PredecessorReclaim> reclaim_predecessor(const std::string& descriptor_path);

}  // namespace kvrt
