// AllocatorService gauges for `kvrt stats` and the 0x0CF
// reconciliation: the pool partition per group, the refcount delta
// (recorded references minus references derived from the request maps the
// sessions hold and the active leases), and leaked blocks (referenced, yet
// reachable from no held request and no held lease).
#include <set>
#include <string>
#include <vector>

#include "services/allocator/allocator_service.hpp"

namespace kvrt {

OwnerStats AllocatorService::stats() const {
  OwnerStats out;
  out.owner = "allocator";
  auto put = [&](std::string name, int64_t value) { out.values.push_back(StatValue{std::move(name), value}); };
  put("zero_on_recycle", allocator_.config().zero_on_recycle ? 1 : 0);
  put("overwrite_pending_blocks", static_cast<int64_t>(allocator_.overwrite_pending_blocks()));
  put("overwritten_blocks", static_cast<int64_t>(allocator_.overwritten_blocks()));
  put("partial_tails_copied", static_cast<int64_t>(partial_tails_copied_));
  put("partial_tail_rows_copied", static_cast<int64_t>(partial_tail_rows_copied_));

  // Reachability: every block a held request maps or a held lease pins.
  std::set<std::pair<uint32_t, uint32_t>> reachable;  // (group index, block id)
  int64_t derived_refs = 0;
  int64_t recorded_refs = 0, referenced_blocks = 0;
  // K/V memory efficiency (the utilisation PagedAttention reports): the
  // committed rows of referenced blocks over the rows those blocks hold.
  int64_t live_valid_rows = 0;
  for (uint32_t g = 0; g < allocator_.group_count(); ++g) {
    const BlockAllocator::PoolCounts c = allocator_.counts(g);
    const std::string p = "pool" + std::to_string(g) + "_";
    put(p + "free_blocks", c.free);
    put(p + "evictable_blocks", c.evictable);
    put(p + "live_blocks", c.live);
    put(p + "peak_live_blocks", c.peak_live);
    put(p + "in_transaction_blocks", c.in_transaction);
    put(p + "capacity_blocks", allocator_.capacity_blocks());
    for (uint32_t slot = 0; slot < allocator_.capacity_blocks(); ++slot) {
      const Result<BlockMeta> meta = allocator_.block(allocator_.handle_of(g, slot));
      if (meta.ok() && meta->refcount > 0) {
        recorded_refs += meta->refcount;
        ++referenced_blocks;
        live_valid_rows += meta->valid_rows;
      }
    }
  }
  for (const auto& [lease, handle] : lease_handles_) {
    ++derived_refs;
    reachable.emplace(handle.group.value, handle.block.value);
  }
  // The paged request view of 0x02: every held request's table entries, a
  // block shared by k requests counted k times [blocks per group].
  std::vector<int64_t> view_blocks(allocator_.group_count(), 0);
  for (uint64_t request : requests_.keys()) {
    for (uint32_t g = 0; g < allocator_.group_count(); ++g) {
      const Result<std::vector<PhysicalBlockHandle>> table = allocator_.table(RequestId{request}, g);
      if (!table.ok()) continue;
      derived_refs += static_cast<int64_t>(table->size());
      view_blocks[g] += static_cast<int64_t>(table->size());
      for (const PhysicalBlockHandle& h : *table) reachable.emplace(h.group.value, h.block.value);
    }
  }
  for (uint32_t g = 0; g < allocator_.group_count(); ++g)
    put("pool" + std::to_string(g) + "_request_view_blocks", view_blocks[g]);
  put("live_valid_rows", live_valid_rows);
  put("live_allocated_rows", referenced_blocks * static_cast<int64_t>(allocator_.block_size()));
  put("refcount_recorded", recorded_refs);
  put("refcount_derived", derived_refs);
  put("refcount_delta", recorded_refs - derived_refs);
  put("leaked_blocks", referenced_blocks - static_cast<int64_t>(reachable.size()));
  put("live_requests", allocator_.live_requests());
  put("live_leases", allocator_.active_leases());
  // Of those, the node's own (the radix index's cached pages): held by
  // session 0, never a worker's, so a run's leak check leaves them out.
  put("node_leases", static_cast<int64_t>(leases_.held_by(kNodeSession).size()));
  put("sessions_holding", static_cast<int64_t>(requests_.sessions()));
  put("epoch", static_cast<int64_t>(allocator_.epoch().value));
  put("operations", static_cast<int64_t>(operations_));
  put("operation_errors", static_cast<int64_t>(errors_));
  put("foreign_pool_refusals", static_cast<int64_t>(foreign_pool_refusals_));
  put("out_of_capacity", static_cast<int64_t>(out_of_capacity_));
  put("locked_eviction_rejects", static_cast<int64_t>(locked_eviction_rejects_));
  put("quota_exceeded", static_cast<int64_t>(quota_exceeded_));
  put("quotas_enforced", quotas_.enforced() ? 1 : 0);
  if (quotas_.enforced()) quotas_.put(out);
  put("sessions_ended", static_cast<int64_t>(sessions_ended_));
  put("requests_reclaimed", static_cast<int64_t>(requests_reclaimed_));
  put("reclaims_pending", static_cast<int64_t>(reclaims_interrupted_.size()));
  put("reclaim_resumptions", static_cast<int64_t>(reclaim_resumptions_));
  hits_.put(out);
  put("leases_reclaimed", static_cast<int64_t>(leases_reclaimed_));
  // Cached identities dropped (a cached block evicted or recycled): the
  // hash chain's evictions, as the allocator makes them.
  put("cache_keys_dropped", static_cast<int64_t>(allocator_.cache_keys_dropped()));
  // Every owner's fault points that fired ([node] fault_injection runs).
  int64_t fired = 0;
  for (const FaultPointFired& f : fault_points_.receipt(TraceContext{}).fired) fired += static_cast<int64_t>(f.fired);
  put("fault_points_fired", fired);
  return out;
}

}  // namespace kvrt
