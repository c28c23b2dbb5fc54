// BlockAllocator: construction, queries, reference and reservation mechanics,
// and the incrementally maintained state digest. The operations live in
// allocator_grow.cpp (allocate, append, fork, touch, commit_rows) and
// allocator_shrink.cpp (truncate, release, evict, cache keys, leases).
#include "services/allocator/block_allocator.hpp"

#include <string>

namespace kvrt {

namespace {
constexpr uint64_t kTagRequest = 1ull << 56;
constexpr uint64_t kTagCell = 2ull << 56;
constexpr uint64_t kTagBlock = 3ull << 56;
constexpr uint64_t kTagLease = 4ull << 56;
constexpr uint64_t kTagEpoch = 5ull << 56;
}  // namespace

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
    a.pools_.push_back(std::move(p));
  }
  for (uint32_t g = 0; g < a.pools_.size(); ++g) {
    Pool& p = a.pools_[g];
    for (uint32_t s = 0; s < p.capacity(); ++s) {
      if (!p.config.initial_generations.empty()) p.blocks[s].generation = p.config.initial_generations[s];
      p.free_queue.push_back(s, a.links_of(g));
      a.digest_.add(a.block_entry(g, s));
    }
  }
  return a;
}

StateDigest BlockAllocator::epoch_image(uint64_t epoch) { return MultisetDigest::image({kTagEpoch, epoch, 0, 0}); }

StateDigest BlockAllocator::digest() const {
  MultisetDigest d = digest_;
  d.add_digest(epoch_image_);
  return d.value();
}

BlockAllocator::PoolCounts BlockAllocator::counts(uint32_t g) const {
  const Pool& p = pools_.at(g);
  const uint32_t unreferenced = p.free_queue.size() + p.evictable_queue.size();
  return PoolCounts{unreferenced - p.evictable, p.evictable, p.live, p.in_transaction};
}

PhysicalBlockHandle BlockAllocator::handle_of(uint32_t g, uint32_t slot) const {
  const Pool& p = pools_[g];
  return PhysicalBlockHandle{p.config.pool, p.config.group, PhysicalBlockId{p.config.block_id_base + slot},
                             BlockGeneration{p.blocks[slot].generation}};
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
    return make_error(ErrorCode::stale_generation,
                      "allocator is at epoch " + std::to_string(epoch_) + ", transaction expected " +
                          std::to_string(expected->value),
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
    return make_error(ErrorCode::unknown_physical,
                      "pool " + std::to_string(h.pool.value) + " does not serve cache group " +
                          std::to_string(h.group.value),
                      "handle.pool");
  const uint64_t id = h.block.value;
  if (id < p.config.block_id_base || id >= uint64_t{p.config.block_id_base} + p.capacity())
    return make_error(ErrorCode::unknown_physical, "block " + std::to_string(id) + " is not in pool " +
                                                       std::to_string(h.pool.value),
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
    if (p.free_queue.size() + p.evictable_queue.size() < bundles) return false;
  return true;
}

bool BlockAllocator::reserve_block(uint32_t g, std::vector<Reservation>& log) {
  Pool& p = pools_[g];
  uint32_t slot;
  BlockState from;
  // Truly free blocks first, then the oldest evictable one (issue 3); under
  // single_lru_queue the front of the one queue, cached or not.
  if (!p.free_queue.empty()) {
    slot = p.free_queue.pop_front(links_of(g));
    from = p.blocks[slot].state;
  } else if (!p.evictable_queue.empty()) {
    slot = p.evictable_queue.pop_front(links_of(g));
    from = BlockState::evictable;
  } else {
    return false;
  }
  BlockMeta& b = p.blocks[slot];
  log.push_back(Reservation{g, slot, from, b.cache_key, b.generation, b.valid_rows});
  // Unpublished: not reachable from any request map, not in any queue. The
  // digest is untouched until publication, so rollback restores it exactly.
  if (from == BlockState::evictable) --p.evictable;
  b.state = BlockState::reserved;
  ++p.in_transaction;
  return true;
}

void BlockAllocator::rollback(std::vector<Reservation>& log) {
  // Reverse order: each block returns to the front of the queue it was popped
  // from, which restores both queues exactly.
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    Pool& p = pools_[it->group_index];
    BlockMeta& b = p.blocks[it->slot];
    b.state = it->from_state;
    b.cache_key = it->evicted_key;
    b.generation = it->generation_before;
    b.valid_rows = it->valid_rows_before;
    --p.in_transaction;
    if (it->from_state == BlockState::evictable) ++p.evictable;
    queue_for(it->group_index, it->from_state).push_front(it->slot, links_of(it->group_index));
  }
  log.clear();
}

void BlockAllocator::publish_reserved(const Reservation& r, uint16_t valid_rows) {
  Pool& p = pools_[r.group_index];
  BlockMeta& b = p.blocks[r.slot];
  const MultisetDigest::Entry before{kTagBlock | (uint64_t{r.group_index} << 32) | r.slot, r.generation_before,
                                     r.valid_rows_before, r.evicted_key};
  if (r.from_state == BlockState::evictable) {
    PhysicalBlockHandle old = handle_of(r.group_index, r.slot);
    old.generation = BlockGeneration{r.generation_before};
    events_.push_back(AllocatorEvent{AllocatorEvent::Kind::cache_key_evicted, old, r.evicted_key});
  }
  // Recycled to a new owner: a new generation, no cached identity, and a
  // valid-row frontier that hides whatever the old owner wrote (0x05E, 0x05F).
  b.generation = r.generation_before + 1;
  b.cache_key = 0;
  b.valid_rows = valid_rows;
  b.refcount = 1;
  b.state = BlockState::live;
  --p.in_transaction;
  ++p.live;
  digest_.replace(before, block_entry(r.group_index, r.slot));
}

void BlockAllocator::add_ref(uint32_t g, uint32_t slot) {
  Pool& p = pools_[g];
  BlockMeta& b = p.blocks[slot];
  if (b.refcount == 0) {
    KVRT_ASSERT(b.state == BlockState::evictable, "add_ref on a block that is neither live nor evictable");
    queue_for(g, b.state).remove(slot, links_of(g));
    --p.evictable;
    b.state = BlockState::live;
    ++p.live;
  }
  ++b.refcount;
}

void BlockAllocator::drop_ref(uint32_t g, uint32_t slot) {
  Pool& p = pools_[g];
  BlockMeta& b = p.blocks[slot];
  KVRT_ASSERT(b.refcount > 0 && b.state == BlockState::live, "drop_ref on an unreferenced block");
  if (--b.refcount == 0) {
    --p.live;
    // 0x04B: a cache index entry is a weak identity; zero refs + key = EVICTABLE.
    b.state = b.cache_key != 0 ? BlockState::evictable : BlockState::free;
    if (b.state == BlockState::evictable) ++p.evictable;
    queue_for(g, b.state).push_back(slot, links_of(g));
  }
}

MultisetDigest::Entry BlockAllocator::request_entry(uint32_t index) const {
  const RequestRecord& r = requests_[index];
  return {kTagRequest | index, r.generation, r.table_version, r.context_tokens};
}

MultisetDigest::Entry BlockAllocator::cell_entry(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) const {
  return {kTagCell | (uint64_t{g} << 32) | index, j, slot, pools_[g].blocks[slot].generation};
}

void BlockAllocator::add_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) {
  const StateDigest image = MultisetDigest::image(cell_entry(index, g, j, slot));
  digest_.add_digest(image);
  requests_[index].cells.add_digest(image);
}

void BlockAllocator::remove_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) {
  const StateDigest image = MultisetDigest::image(cell_entry(index, g, j, slot));
  digest_.remove_digest(image);
  requests_[index].cells.remove_digest(image);
}

MultisetDigest::Entry BlockAllocator::block_entry(uint32_t g, uint32_t slot) const {
  const BlockMeta& b = pools_[g].blocks[slot];
  return {kTagBlock | (uint64_t{g} << 32) | slot, b.generation, b.valid_rows, b.cache_key};
}

MultisetDigest::Entry BlockAllocator::lease_entry(uint32_t index) const {
  const Lease& l = leases_[index];
  return {kTagLease | index, l.generation, (uint64_t{l.group_index} << 32) | l.slot,
          pools_[l.group_index].blocks[l.slot].generation};
}

void BlockAllocator::begin_receipt(AllocationReceipt& out, AllocationOperation op, const RequestRecord*) {
  out.transaction_id = TransactionId{next_transaction_++};
  out.operation = op;
  out.predecessor_digest = digest();
  out.useful_new_rows = 0;
  out.new_physical_blocks = 0;
  out.copied_rows = 0;
  out.copy_payload_bytes = 0;
  out.refcount_deltas.clear();
  out.published_entries.clear();
  out.evicted_handles.clear();
  out.append_path = AppendPath::not_append;
  out.outcome = AllocationOutcome::committed;
  out.rollback_reason.clear();
}

void BlockAllocator::finish_receipt(AllocationReceipt& out, const RequestRecord* r, uint32_t index) {
  if (r != nullptr) {
    out.request_id = RequestId{index};
    out.request_generation = RequestGeneration{r->generation};
    out.table_version_after = TableVersion{r->table_version};
    out.context_tokens_after = r->context_tokens;
  }
  out.successor_digest = digest();
  out.allocator_epoch_after = Epoch{epoch_};
}

void BlockAllocator::record_delta(std::vector<RefcountDelta>& deltas, uint32_t g, uint32_t slot, uint32_t before,
                                  uint32_t after) const {
  deltas.push_back(RefcountDelta{handle_of(g, slot), before, after});
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
