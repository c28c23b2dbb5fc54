#include "services/allocator/allocator_observation.hpp"

#include <string>

namespace kvrt {

Result<PoolObservation> observe_allocator_pool(const BlockAllocator& allocator, uint32_t group_index,
                                               std::span<const RequestId> open_requests,
                                               std::span<const BlockLease> active_leases) {
  if (group_index >= allocator.group_count())
    return make_error(ErrorCode::unknown_group,
                      "group index " + std::to_string(group_index) + " of " + std::to_string(allocator.group_count()),
                      "group_index");
  PoolObservation obs;
  obs.capacity_blocks = allocator.capacity_blocks();
  for (uint32_t slot = 0; slot < obs.capacity_blocks; ++slot) {
    const PhysicalBlockHandle h = allocator.handle_of(group_index, slot);
    obs.pool = h.pool;
    auto meta = allocator.block(h);
    if (!meta.ok()) return meta.error();
    BlockObservation b;
    b.block = h.block;
    b.recorded_refcount = meta->refcount;
    switch (meta->state) {
      case BlockState::free:
        b.state = ObservedBlockState::free;
        break;
      case BlockState::evictable:
        b.state = ObservedBlockState::evictable;
        break;
      case BlockState::live:
        b.state = ObservedBlockState::live;
        break;
      case BlockState::reserved:
        b.state = ObservedBlockState::reserved;
        break;
      case BlockState::copying:
      case BlockState::ready:
        b.state = ObservedBlockState::copying;
        break;
    }
    obs.blocks.push_back(b);
  }
  for (RequestId r : open_requests) {
    auto table = allocator.table(r, group_index);
    if (!table.ok()) return table.error();
    for (const PhysicalBlockHandle& h : *table) obs.request_map_refs.push_back(h.block);
  }
  for (const BlockLease& l : active_leases)
    if (l.handle.pool == obs.pool) obs.lease_refs.push_back(l.handle.block);
  return obs;
}

}  // namespace kvrt
