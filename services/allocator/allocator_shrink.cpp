// BlockAllocator operations that drop references or identities: truncate,
// release / cancel (0x05E), evict, cache-key publication and leases.
#include <string>

#include "services/allocator/block_allocator_hot.hpp"
#include "services/common/units.hpp"

namespace kvrt {

Status BlockAllocator::release_tables(uint32_t index, uint32_t keep_blocks, ReleaseResult& out) {
  RequestRecord& r = requests_[index];
  const uint32_t G = group_count();
  bool returned_to_pool = false;
  for (uint32_t g = 0; g < G; ++g) {
    auto& table = r.tables[g];
    if (table.size() <= keep_blocks) continue;
    const uint32_t n = static_cast<uint32_t>(table.size()) - keep_blocks;
    // The receipt's lists are written in place and the pool's counters are
    // kept in registers: with the queue upkeep this loop is the whole cost of a
    // release (the 150 ns target for 128 blocks of `kvrt bench allocator`).
    const size_t d0 = out.refcount_deltas.size();
    out.refcount_deltas.resize(d0 + n);
    out.freed_handles.reserve(out.freed_handles.size() + n);
    RefcountDelta* delta = out.refcount_deltas.data() + d0;
    scratch_unreferenced_.resize(n);
    uint32_t* unreferenced = scratch_unreferenced_.data();
    Pool& p = pools_[g];
    const PoolId pool = p.config.pool;
    const CacheGroupId group = p.config.group;
    const uint32_t id_base = p.config.block_id_base;
    uint32_t newly_unreferenced = 0, newly_evictable = 0;
    // Tail first, so the evictable queue evicts a request's tail blocks before
    // its prefix (the prefix is the part other requests can still hit).
    for (uint32_t j = static_cast<uint32_t>(table.size()); j-- > keep_blocks;) {
      const uint32_t slot = table[j];
      BlockMeta& b = p.blocks[slot];
      const uint32_t before = b.refcount;
      const PhysicalBlockHandle h{pool, group, PhysicalBlockId{id_base + slot}, BlockGeneration{b.generation}};
      *delta++ = RefcountDelta{h, before, before - 1};
      if (keep_blocks > 0) remove_cell(index, g, j, slot);
      const BlockState after = unreference(b);
      if (after == BlockState::live) continue;
      unreferenced[newly_unreferenced++] = slot;
      if (after == BlockState::evictable) {
        out.evictable_handles.push_back(h);
        ++newly_evictable;
      } else {
        out.freed_handles.push_back(h);
      }
    }
    table.resize(keep_blocks);
    p.live -= newly_unreferenced;
    p.evictable += newly_evictable;
    if (newly_unreferenced > 0) returned_to_pool = true;
    // Queue upkeep in release order (tail first within each queue).
    if (newly_evictable == 0 && !single_queue()) {
      p.free_ring.push_back_n(unreferenced, newly_unreferenced);
    } else {
      for (uint32_t i = 0; i < newly_unreferenced; ++i)
        enqueue_unreferenced(g, unreferenced[i], p.blocks[unreferenced[i]].state);
    }
  }
  if (keep_blocks == 0) {
    // Whole request: its cells leave the digest as one aggregate (O(1)).
    digest_.remove_digest(r.cells.value());
    r.cells = MultisetDigest{};
  }
  if (returned_to_pool) bump_epoch();
  return Status::success();
}

namespace {
void begin_release(ReleaseResult& out, TransactionId id, StateDigest before) {
  out.transaction_id = id;
  out.predecessor_digest = before;
  out.refcount_deltas.clear();
  out.freed_handles.clear();
  out.evictable_handles.clear();
}
}  // namespace

Status BlockAllocator::truncate_into(const TruncateArgs& a, ReleaseResult& out) {
  if (!fence_current(a.fence)) [[unlikely]]
    return check_fence(a.fence);
  const uint32_t G = group_count(), P = block_size();
  const uint32_t index = static_cast<uint32_t>(a.fence.request.value);
  RequestRecord& r = requests_[index];
  // 0x05E: truncate may remove only a suffix; an interior range would break
  // position continuity.
  if (a.to_token != r.context_tokens)
    return make_error(ErrorCode::invalid_argument,
                      "truncate must remove a suffix: range [" + std::to_string(a.from_token) + "," +
                          std::to_string(a.to_token) + ") does not end at the context length " +
                          std::to_string(r.context_tokens),
                      "to_token");
  if (a.from_token >= a.to_token)
    return make_error(
        ErrorCode::invalid_argument,
        "empty truncation range [" + std::to_string(a.from_token) + "," + std::to_string(a.to_token) + ")",
        "from_token");
  if (a.from_token == 0)
    return make_error(ErrorCode::invalid_argument, "truncating every token is a release, not a truncate", "from_token");
  begin_release(out, TransactionId{next_transaction_++}, state_digest());
  out.request_id = a.fence.request;
  out.request_generation = a.fence.generation;
  out.reason = ReleaseReason::truncated;
  out.context_tokens_before = r.context_tokens;
  const uint32_t keep_blocks = static_cast<uint32_t>(ceil_div(a.from_token, P));
  KVRT_TRY(release_tables(index, keep_blocks, out));
  // A private tail keeps only the rows that are still history; a shared or
  // cached one is not this request's to change.
  // The decision is taken for the whole bundle so cache groups never diverge.
  const uint32_t o = a.from_token % P;
  bool private_tail = o != 0;
  for (uint32_t g = 0; g < G && private_tail; ++g) {
    const BlockMeta& b = pools_[g].blocks[r.tables[g][keep_blocks - 1]];
    private_tail = b.refcount == 1 && b.cache_key == kNoCacheKey;
  }
  if (private_tail)
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t slot = r.tables[g][keep_blocks - 1];
      BlockMeta& b = pools_[g].blocks[slot];
      if (b.valid_rows > o) set_valid_rows(g, slot, static_cast<uint16_t>(o));
    }
  set_request_counters(index, r.table_version + 1, a.from_token);
  out.context_tokens_after = r.context_tokens;
  out.table_version_after = TableVersion{r.table_version};
  out.successor_digest = state_digest();
  out.allocator_epoch_after = Epoch{epoch_};
  return Status::success();
}

Status BlockAllocator::release_into(const ReleaseArgs& a, ReleaseResult& out) {
  if (!fence_current(a.fence)) [[unlikely]]
    return check_fence(a.fence);
  if (a.reason != ReleaseReason::finished && a.reason != ReleaseReason::cancelled &&
      a.reason != ReleaseReason::preempted)
    return make_error(ErrorCode::invalid_argument, "release reason must be finished, cancelled or preempted", "reason");
  const uint32_t index = static_cast<uint32_t>(a.fence.request.value);
  RequestRecord& r = requests_[index];
  begin_release(out, TransactionId{next_transaction_++}, state_digest());
  out.request_id = a.fence.request;
  out.request_generation = a.fence.generation;
  out.reason = a.reason;
  out.context_tokens_before = r.context_tokens;
  digest_.remove_digest(request_image(index));
  KVRT_TRY(release_tables(index, 0, out));
  r.open = false;
  r.context_tokens = 0;
  --open_requests_;
  free_request_slots_.push_back(index);
  out.context_tokens_after = 0;
  out.table_version_after = TableVersion{r.table_version};
  out.successor_digest = state_digest();
  out.allocator_epoch_after = Epoch{epoch_};
  return Status::success();
}

Status BlockAllocator::evict_into(const PhysicalBlockHandle& handle, AllocationReceipt& out) {
  auto slot_r = resolve(handle, UINT32_MAX);
  if (!slot_r.ok()) return slot_r.error();
  const uint32_t g = group_index_of(handle.group), slot = *slot_r;
  BlockMeta& b = pools_[g].blocks[slot];
  if (b.cache_key == kNoCacheKey)
    return make_error(ErrorCode::invalid_argument,
                      "block " + std::to_string(handle.block.value) + " has no cached identity to evict", "handle");
  begin_receipt(out, AllocationOperation::evict, nullptr);
  events_.push_back(AllocatorEvent{AllocatorEvent::Kind::cache_key_evicted, handle, b.cache_key});
  set_cache_key(g, slot, kNoCacheKey);
  if (b.refcount == 0) {
    // EVICTABLE -> FREE; a live mapping is never revoked (0x05E). Under
    // single_lru_queue the block keeps its place in the one queue.
    if (config_.queue_policy == FreeQueuePolicy::free_first_then_oldest_evictable) {
      pools_[g].lru_queue.remove(slot, links_of(g));
      pools_[g].free_ring.push_back(slot);
    }
    --pools_[g].evictable;
    b.state = BlockState::free;
  }
  bump_epoch();
  out.evicted_handles.push_back(handle);
  finish_receipt(out, nullptr, 0);
  return Status::success();
}

Status BlockAllocator::publish_cache_key_into(const PhysicalBlockHandle& handle, CacheKey cache_key,
                                              AllocationReceipt& out) {
  if (cache_key == kNoCacheKey)
    return make_error(ErrorCode::invalid_argument, "cache key 0 means \"none\"", "cache_key");
  auto slot_r = resolve(handle, UINT32_MAX);
  if (!slot_r.ok()) return slot_r.error();
  const uint32_t g = group_index_of(handle.group), slot = *slot_r;
  BlockMeta& b = pools_[g].blocks[slot];
  if (b.state != BlockState::live)
    return make_error(ErrorCode::unknown_physical,
                      "block " + std::to_string(handle.block.value) + " is not referenced by any request", "handle");
  // The index publishes only rows that are committed.
  if (b.valid_rows == 0)
    return make_error(ErrorCode::row_not_valid,
                      "block " + std::to_string(handle.block.value) + " has no committed rows to publish", "handle");
  if (b.cache_key != kNoCacheKey && b.cache_key != cache_key)
    return make_error(ErrorCode::invalid_argument,
                      "block " + std::to_string(handle.block.value) + " already carries another cache identity",
                      "cache_key");
  begin_receipt(out, AllocationOperation::publish_cache_key, nullptr);
  if (b.cache_key != cache_key) set_cache_key(g, slot, cache_key);
  out.published_entries.push_back(TableEntryUpdate{0, handle, b.valid_rows});
  finish_receipt(out, nullptr, 0);
  return Status::success();
}

Result<BlockLease> BlockAllocator::acquire_lease(const PhysicalBlockHandle& handle) {
  auto slot_r = resolve(handle, UINT32_MAX);
  if (!slot_r.ok()) return slot_r.error();
  const uint32_t g = group_index_of(handle.group), slot = *slot_r;
  const BlockMeta& b = pools_[g].blocks[slot];
  if (b.state != BlockState::live && b.state != BlockState::evictable)
    return make_error(ErrorCode::unknown_physical,
                      "block " + std::to_string(handle.block.value) + " holds no committed K/V", "handle");
  uint32_t li;
  if (!free_lease_slots_.empty()) {
    li = free_lease_slots_.back();
    free_lease_slots_.pop_back();
  } else {
    li = static_cast<uint32_t>(leases_.size());
    leases_.emplace_back();
  }
  Lease& l = leases_[li];
  l.handle = handle;
  l.group_index = g;
  l.slot = slot;
  // 31 bits: the id's top bit names the owner (OwnerLeaseId).
  l.generation = l.generation >= OwnerLeaseId::kMaxGeneration ? 1 : l.generation + 1;
  l.active = true;
  ++active_leases_;
  add_ref(g, slot);
  digest_.add(lease_entry(li));
  return BlockLease{OwnerLeaseId::allocator_lease(li, l.generation).id(), handle};
}

Status BlockAllocator::release_lease(LeaseId lease) {
  const OwnerLeaseId parts = OwnerLeaseId::of(lease);
  const uint32_t li = parts.slot(), gen = parts.generation();
  if (parts.owner() != LeaseOwner::allocator || li >= leases_.size() || !leases_[li].active ||
      leases_[li].generation != gen)
    return make_error(ErrorCode::stale_generation,
                      "lease " + std::to_string(lease.value) + " is not active (released twice or stale)", "lease");
  Lease& l = leases_[li];
  digest_.remove(lease_entry(li));
  l.active = false;
  --active_leases_;
  free_lease_slots_.push_back(li);
  const bool last = pools_[l.group_index].blocks[l.slot].refcount == 1;
  drop_ref(l.group_index, l.slot);
  if (last) bump_epoch();
  return Status::success();
}

}  // namespace kvrt
