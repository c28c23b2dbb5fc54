// BlockAllocator::validate(): re-derives every invariant from scratch
// (docs/conventions.md habit 2, the verifyQueueIntegrity habit). O(pool + tables);
// tests call it after every transition.
#include <string>
#include <vector>

#include "services/allocator/block_allocator_hot.hpp"
#include "services/common/units.hpp"

namespace kvrt {

namespace {
Error broken(const std::string& what) {
  return make_error(ErrorCode::invariant_violated, "allocator invariant: " + what, "validate");
}
}  // namespace

StateDigest BlockAllocator::recompute_digest() const {
  MultisetDigest d;
  for (uint32_t g = 0; g < pools_.size(); ++g)
    for (uint32_t s = 0; s < pools_[g].capacity(); ++s) d.add_digest(block_image(g, s));
  for (uint32_t i = 0; i < requests_.size(); ++i) {
    const RequestRecord& r = requests_[i];
    if (!r.open) continue;
    d.add_digest(request_image(i));
    for (uint32_t g = 0; g < pools_.size(); ++g)
      for (uint32_t j = 0; j < r.tables[g].size(); ++j) d.add_digest(cell_image(i, g, j, r.tables[g][j]));
  }
  for (uint32_t li = 0; li < leases_.size(); ++li)
    if (leases_[li].active) d.add(lease_entry(li));
  d.add_digest(epoch_image(epoch_));
  return d.value();
}

Status BlockAllocator::validate() const {
  const uint32_t G = group_count(), P = block_size();
  // 0x04B: refcount = request-map references + active leases.
  std::vector<std::vector<uint32_t>> derived(G);
  for (uint32_t g = 0; g < G; ++g) derived[g].assign(pools_[g].capacity(), 0);
  uint32_t open = 0;
  for (uint32_t i = 0; i < requests_.size(); ++i) {
    const RequestRecord& r = requests_[i];
    if (!r.open) continue;
    ++open;
    const uint64_t blocks = ceil_div(r.context_tokens, P);
    for (uint32_t g = 0; g < G; ++g) {
      // Cross-group: every group's table has exactly ceil(context / P) entries.
      if (r.tables[g].size() != blocks)
        return broken("request " + std::to_string(i) + " group " + std::to_string(g) + " has " +
                      std::to_string(r.tables[g].size()) + " blocks for " + std::to_string(r.context_tokens) +
                      " tokens");
      for (uint32_t j = 0; j < r.tables[g].size(); ++j) {
        const uint32_t slot = r.tables[g][j];
        if (slot >= pools_[g].capacity()) return broken("table entry out of pool");
        const BlockMeta& b = pools_[g].blocks[slot];
        if (b.state != BlockState::live)
          return broken("request " + std::to_string(i) + " maps block " + std::to_string(slot) + " of group " +
                        std::to_string(g) + " that is not LIVE (unpublished or free)");
        ++derived[g][slot];
        // Cross-group valid rows of one bundle agree.
        if (g > 0 && b.valid_rows != pools_[0].blocks[r.tables[0][j]].valid_rows)
          return broken("request " + std::to_string(i) + " block " + std::to_string(j) +
                        " has different valid rows across cache groups");
      }
    }
  }
  if (open != open_requests_) return broken("open request count drifted");
  uint32_t active = 0;
  for (const Lease& l : leases_)
    if (l.active) {
      ++active;
      ++derived[l.group_index][l.slot];
      if (pools_[l.group_index].blocks[l.slot].generation != l.handle.generation.value)
        return broken("a lease names a recycled block");
    }
  if (active != active_leases_) return broken("active lease count drifted");

  for (uint32_t g = 0; g < G; ++g) {
    const Pool& p = pools_[g];
    uint32_t live = 0, in_txn = 0, free = 0, evictable = 0;
    for (uint32_t s = 0; s < p.capacity(); ++s) {
      const BlockMeta& b = p.blocks[s];
      if (b.refcount != derived[g][s])
        return broken("group " + std::to_string(g) + " block " + std::to_string(s) + " refcount " +
                      std::to_string(b.refcount) + " but reachability gives " + std::to_string(derived[g][s]));
      if (b.valid_rows > P) return broken("valid rows exceed the block size");
      if (b.named_in_call != 0) return broken("a duplicate mark outlived resolve_bundles");
      switch (b.state) {
        case BlockState::live:
          if (b.refcount == 0) return broken("LIVE block without references");
          ++live;
          break;
        case BlockState::evictable:
          if (b.refcount != 0 || b.cache_key == kNoCacheKey)
            return broken("EVICTABLE block with refs or without a key");
          ++evictable;
          break;
        case BlockState::free:
          if (b.refcount != 0 || b.cache_key != kNoCacheKey) return broken("FREE block with refs or a key");
          ++free;
          break;
        default:
          ++in_txn;  // only legal while a transaction runs
          break;
      }
    }
    if (in_txn != 0 || p.in_transaction != 0) return broken("a block is left in a transaction phase");
    if (live != p.live) return broken("live count drifted");
    if (p.peak_live < p.live) return broken("peak live count below the live count");
    // Queue membership: every FREE block exactly once in the free ring, every
    // EVICTABLE block exactly once in the LRU queue, nothing else (under
    // single_lru_queue: every unreferenced block once in the LRU queue).
    auto links = [&](uint32_t b) -> const QueueLinks& { return p.blocks[b].links; };
    const auto ring_members = p.free_ring.members();
    const auto lru_members = p.lru_queue.members(links);
    if (evictable != p.evictable) return broken("evictable count drifted");
    std::vector<uint8_t> queued(p.capacity(), 0);
    for (const auto* members : {&ring_members, &lru_members})
      for (uint32_t b : *members) {
        if (b >= p.capacity()) return broken("queued slot out of pool");
        if (queued[b]++ != 0) return broken("block " + std::to_string(b) + " queued twice");
      }
    if (config_.queue_policy == FreeQueuePolicy::single_lru_queue) {
      if (!ring_members.empty()) return broken("free ring used under single_lru_queue");
      if (lru_members.size() != free + evictable || p.lru_queue.size() != free + evictable)
        return broken("single queue size mismatch");
      for (uint32_t b : lru_members)
        if (p.blocks[b].state != BlockState::free && p.blocks[b].state != BlockState::evictable)
          return broken("referenced block in the LRU queue");
    } else {
      if (ring_members.size() != free || p.free_ring.size() != free) return broken("free ring size mismatch");
      if (lru_members.size() != evictable || p.lru_queue.size() != evictable) return broken("LRU queue size mismatch");
      for (uint32_t b : ring_members)
        if (p.blocks[b].state != BlockState::free) return broken("non-FREE block in the free ring");
      for (uint32_t b : lru_members)
        if (p.blocks[b].state != BlockState::evictable) return broken("non-EVICTABLE block in the LRU queue");
    }
    // Partition: free + evictable + live + in-transaction = pool.
    if (free + evictable + live + in_txn != p.capacity()) return broken("pool partition does not add up");
  }
  if (recompute_digest() != state_digest())
    return broken("incremental digest " + state_digest().hex() + " != recomputed " + recompute_digest().hex());
  return Status::success();
}

}  // namespace kvrt
