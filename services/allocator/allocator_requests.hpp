#pragma once
// What the node's other owners ask of the allocator owner inside one node
// process (never on the wire): the sans-IO runs of the index and executor
// owners (prefix_batch_run.hpp, execute_batch_run.hpp) name these requests,
// and the actor that drives a run sends each to the allocator's actor.
#include <cstdint>
#include <optional>
#include <vector>

#include "schema/allocator_types.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

// One cache-key tag the index decided on; the allocator owner applies it.
struct CacheKeyTag {
  PhysicalBlockHandle handle;
  CacheKey cache_key;
};

// A request's tables as a session may read them. Answered by the view, or
// nullopt when the session holds no such request.
struct TableRead {
  RequestId request;
};

// The hash chain's weak identities. Answered by one flag per tag: 1
// applied, 0 refused (the block changed since the table was read).
struct TagApply {
  std::vector<CacheKeyTag> tags;
};

// The radix index's cached pages, one lease per block held by the node.
// Answered by one lease per handle, nullopt where it was refused.
struct NodeLeaseAcquire {
  std::vector<PhysicalBlockHandle> handles;
};

// The allocator's answer to a publication's TagApply (tags_applied) or
// NodeLeaseAcquire (leases). Both empty: the allocator did not answer, and
// the publication is withdrawn.
struct PublicationAnswer {
  std::vector<uint8_t> tags_applied;
  std::vector<std::optional<LeaseId>> leases;
  // The publication is taken back whatever was granted (a fault point fired,
  // or the allocator never answered): nothing of its decision may stay.
  bool withdrawn = false;
};

// Node leases given back; nothing answers it.
struct NodeLeaseRelease {
  std::vector<LeaseId> leases;
};

}  // namespace kvrt
