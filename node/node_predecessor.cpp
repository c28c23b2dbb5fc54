#include "node/node_predecessor.hpp"

#include <algorithm>
#include <filesystem>

#include "services/common/process_identity.hpp"
#include "services/session/node_descriptor.hpp"
#include "shm/stale_segments.hpp"

namespace kvrt {

Result<PredecessorReclaim> reclaim_predecessor(const std::string& descriptor_path) {
  PredecessorReclaim out;
  std::error_code ec;
  if (std::filesystem::exists(descriptor_path, ec)) {
    Result<NodeDescriptor> d = read_node_descriptor(descriptor_path);
    if (d.ok()) {
      if (owner_state(d->process()) == OwnerState::alive)
        return make_error(ErrorCode::descriptor_in_use,
                          "the node at " + d->address_and_pid() + " serves " + descriptor_path +
                              "; stop it first or give this node another descriptor path",
                          "descriptor");
      out.predecessor_pid = d->node_pid;
      uint32_t last = 0;
      for (const PoolAttachment& p : d->pools) last = std::max(last, p.generation.value);
      if (d->mapper) last = std::max(last, d->mapper->pool_generation);
      out.pool_generation = PoolGeneration{last + 1};
      if (!d->token_dir.empty() && std::filesystem::exists(d->token_dir, ec)) {
        std::filesystem::remove_all(d->token_dir, ec);
        if (ec)
          return make_error(ErrorCode::io,
                            "cannot remove the dead node's token directory " + d->token_dir + ": " + ec.message(),
                            "token_dir");
        out.token_dir_removed = true;
      }
      std::filesystem::remove(descriptor_path, ec);
      if (ec)
        return make_error(ErrorCode::io,
                          "cannot remove the dead node's descriptor " + descriptor_path + ": " + ec.message(),
                          "descriptor");
    }
  }
  // Every dead owner's segments, not only the predecessor's: a killed
  // `kvrt run` or a node started on another descriptor path leaves the same
  // kind of garbage, and only segments whose recorded owner is gone go.
  shm::SegmentSweep sweep;
  KVRT_TRY_ASSIGN(sweep, shm::remove_stale_pool_segments());
  out.segments_removed = sweep.removed;
  out.segment_bytes_removed = sweep.removed_bytes;
  return out;
}

}  // namespace kvrt
