#pragma once
// The allocator's committed state as the reconciliation gauges of 0x0CF read
// it (services/telemetry/reconciliation_gauges.hpp): every block's recorded
// refcount and state, and the references the caller says exist.
#include <span>

#include "services/allocator/block_allocator.hpp"
#include "services/telemetry/reconciliation_gauges.hpp"

namespace kvrt {

// An observation of one cache group's pool of a committed BlockAllocator:
// states and recorded refcounts from its block metadata; the derived side
// from the block tables of `open_requests` and from `active_leases`, which
// the caller (the allocator actor) knows independently of the refcounts.
Result<PoolObservation> observe_allocator_pool(const BlockAllocator& allocator, uint32_t group_index,
                                               std::span<const RequestId> open_requests,
                                               std::span<const BlockLease> active_leases);

}  // namespace kvrt
