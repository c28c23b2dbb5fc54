// BlockAllocator: construction, queries, reference and reservation mechanics,
// and the incrementally maintained state digest. The operations live in
// allocator_grow.cpp (allocate, append, fork, touch, commit_rows) and
// allocator_shrink.cpp (truncate, release, evict, cache keys, leases).
#include <string>

#include "services/allocator/block_allocator_hot.hpp"

namespace kvrt {

using namespace allocator_digest;

Result<BlockAllocator> BlockAllocator::create(BlockAllocatorConfig config, BlockPayloadStore* store) {
  KVRT_TRY(config.validate());
  BlockAllocator a;
  a.config_ = std::move(config);
  a.store_ = store;
  a.epoch_ = a.config_.initial_epoch;
  a.epoch_image_ = epoch_image(a.epoch_);
  for (uint32_t g = 0; g < a.config_.groups.size(); ++g) {
    Pool p;
    p.config = a.config_.groups[g];
    p.blocks.resize(p.config.capacity_blocks);
    p.free_ring = FreeBlockRing(p.config.capacity_blocks);
    a.pools_.push_back(std::move(p));
  }
  for (uint32_t g = 0; g < a.pools_.size(); ++g) {
    Pool& p = a.pools_[g];
    for (uint32_t s = 0; s < p.capacity(); ++s) {
      if (!p.config.initial_generations.empty()) p.blocks[s].generation = p.config.initial_generations[s];
      a.enqueue_unreferenced(g, s, BlockState::free);
      a.digest_.add_digest(a.block_image(g, s));
    }
  }
  return a;
}

StateDigest BlockAllocator::epoch_image(uint64_t epoch) { return MultisetDigest::image({kTagEpoch, epoch, 0, 0}); }

BlockAllocator::PoolCounts BlockAllocator::counts(uint32_t g) const {
  const Pool& p = pools_.at(g);
  return PoolCounts{p.unreferenced() - p.evictable, p.evictable, p.live, p.in_transaction, p.peak_live};
}

uint32_t BlockAllocator::group_index_of(CacheGroupId group) const {
  for (uint32_t g = 0; g < pools_.size(); ++g)
    if (pools_[g].config.group == group) return g;
  return UINT32_MAX;
}

Status BlockAllocator::check_fence(const RequestFence& f) const {
  const uint64_t index = f.request.value;
  if (index >= requests_.size() || !requests_[index].open)
    return make_error(ErrorCode::unknown_request, "request " + std::to_string(index) + " is not open", "request");
  const RequestRecord& r = requests_[index];
  if (r.generation != f.generation.value)
    return make_error(ErrorCode::stale_generation,
                      "request " + std::to_string(index) + " is at generation " + std::to_string(r.generation) +
                          ", transaction expected " + std::to_string(f.generation.value),
                      "request_generation");
  if (r.table_version != f.table_version.value)
    return make_error(ErrorCode::stale_table_version,
                      "request " + std::to_string(index) + " table is at version " + std::to_string(r.table_version) +
                          ", transaction expected " + std::to_string(f.table_version.value),
                      "table_version");
  return Status::success();
}

Status BlockAllocator::check_epoch(const std::optional<Epoch>& expected) const {
  if (expected && expected->value != epoch_)
    return make_error(
        ErrorCode::stale_generation,
        "allocator is at epoch " + std::to_string(epoch_) + ", transaction expected " + std::to_string(expected->value),
        "allocator_epoch");
  return Status::success();
}

Result<uint32_t> BlockAllocator::resolve(const PhysicalBlockHandle& h, uint32_t expected_g) const {
  const uint32_t g = group_index_of(h.group);
  if (g == UINT32_MAX)
    return make_error(ErrorCode::unknown_group, "cache group " + std::to_string(h.group.value) + " has no pool",
                      "handle.group");
  if (expected_g != UINT32_MAX && g != expected_g)
    return make_error(ErrorCode::invalid_argument,
                      "handle of cache group " + std::to_string(h.group.value) + " where group index " +
                          std::to_string(expected_g) + " was expected (half bundle)",
                      "handle.group");
  const Pool& p = pools_[g];
  if (h.pool != p.config.pool)
    return make_error(
        ErrorCode::unknown_physical,
        "pool " + std::to_string(h.pool.value) + " does not serve cache group " + std::to_string(h.group.value),
        "handle.pool");
  const uint64_t id = h.block.value;
  if (id < p.config.block_id_base || id >= uint64_t{p.config.block_id_base} + p.capacity())
    return make_error(ErrorCode::unknown_physical,
                      "block " + std::to_string(id) + " is not in pool " + std::to_string(h.pool.value),
                      "handle.block");
  const uint32_t slot = static_cast<uint32_t>(id - p.config.block_id_base);
  const BlockMeta& b = p.blocks[slot];
  // 0x05F: the generation fences ABA reuse of a block id.
  if (b.generation != h.generation.value)
    return make_error(ErrorCode::stale_physical,
                      "block " + std::to_string(id) + "@" + std::to_string(h.generation.value) +
                          " is stale: the block is at generation " + std::to_string(b.generation),
                      "handle.generation");
  return slot;
}

bool BlockAllocator::available_for(uint32_t bundles) const {
  for (const Pool& p : pools_)
    if (p.unreferenced() < bundles) return false;
  return true;
}

void BlockAllocator::rollback(std::vector<Reservation>& log) {
  // Reverse order: each block returns to the front of the queue it was popped
  // from, which restores both queues exactly.
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    Pool& p = pools_[it->group_index];
    BlockMeta& b = p.blocks[it->slot];
    b.state = it->from_state;  // nothing else of the block changed before publication
    --p.in_transaction;
    if (it->from_state == BlockState::evictable) ++p.evictable;
    requeue_front(it->group_index, it->slot, it->from_state);
  }
  log.clear();
}

MultisetDigest::Entry BlockAllocator::lease_entry(uint32_t index) const {
  const Lease& l = leases_[index];
  return {kTagLease | index, l.generation, (uint64_t{l.group_index} << 32) | l.slot,
          pools_[l.group_index].blocks[l.slot].generation};
}

Result<std::vector<PhysicalBlockHandle>> BlockAllocator::table(RequestId request, uint32_t g) const {
  if (request.value >= requests_.size() || !requests_[request.value].open)
    return make_error(ErrorCode::unknown_request, "request " + std::to_string(request.value) + " is not open",
                      "request");
  if (g >= pools_.size()) return make_error(ErrorCode::unknown_group, "no group index " + std::to_string(g), "group");
  std::vector<PhysicalBlockHandle> out;
  for (uint32_t slot : requests_[request.value].tables[g]) out.push_back(handle_of(g, slot));
  return out;
}

Result<RequestFence> BlockAllocator::fence(RequestId request) const {
  if (request.value >= requests_.size() || !requests_[request.value].open)
    return make_error(ErrorCode::unknown_request, "request " + std::to_string(request.value) + " is not open",
                      "request");
  const RequestRecord& r = requests_[request.value];
  return RequestFence{request, RequestGeneration{r.generation}, TableVersion{r.table_version}};
}

Result<uint32_t> BlockAllocator::context_tokens(RequestId request) const {
  if (request.value >= requests_.size() || !requests_[request.value].open)
    return make_error(ErrorCode::unknown_request, "request " + std::to_string(request.value) + " is not open",
                      "request");
  return requests_[request.value].context_tokens;
}

Result<BlockMeta> BlockAllocator::block(const PhysicalBlockHandle& handle) const {
  auto slot = resolve(handle, UINT32_MAX);
  if (!slot.ok()) return slot.error();
  return pools_[group_index_of(handle.group)].blocks[*slot];
}

std::vector<AllocatorEvent> BlockAllocator::drain_events() {
  std::vector<AllocatorEvent> out;
  out.swap(events_);
  drained_events_ += out.size();
  return out;
}

}  // namespace kvrt
