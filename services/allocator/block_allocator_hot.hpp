#pragma once
// The allocator's per-block mechanics, inline for the translation units that
// implement BlockAllocator (block_allocator.cpp, allocator_grow.cpp,
// allocator_shrink.cpp, allocator_validate.cpp). They run once per block of a
// transaction, so a call per step was a measurable share of a 128-block
// allocate (`kvrt bench allocator`). Not for use outside the owner.
#include "services/allocator/block_allocator.hpp"

namespace kvrt {

// Domain tags of the digest entries (state_digest.hpp): the first word of
// every entry, so that entries of different kinds never collide.
namespace allocator_digest {
inline constexpr uint64_t kTagRequest = 1ull << 56;
inline constexpr uint64_t kTagCell = 2ull << 56;
inline constexpr uint64_t kTagBlock = 3ull << 56;
inline constexpr uint64_t kTagLease = 4ull << 56;
inline constexpr uint64_t kTagEpoch = 5ull << 56;
}  // namespace allocator_digest

// A request header: identity (index, generation), counters table version and
// length. Opening and closing a request adds and removes the whole image.
inline MultisetDigest::Coefficients BlockAllocator::request_coefficients(uint32_t index) const {
  return MultisetDigest::coefficients(allocator_digest::kTagRequest,
                                      (uint64_t{requests_[index].generation} << 32) | index);
}

inline StateDigest BlockAllocator::request_image(uint32_t index) const {
  const RequestRecord& r = requests_[index];
  const auto c = request_coefficients(index);
  StateDigest d = MultisetDigest::pair_image(allocator_digest::kTagRequest | index, r.generation);
  const StateDigest t = MultisetDigest::scaled(c.first, r.table_version);
  const StateDigest n = MultisetDigest::scaled(c.second, r.context_tokens);
  return StateDigest{d.lo + t.lo + n.lo, d.hi + t.hi + n.hi};
}

inline void BlockAllocator::set_request_counters(uint32_t index, uint64_t table_version, uint32_t context_tokens) {
  RequestRecord& r = requests_[index];
  const auto c = request_coefficients(index);
  digest_.add_digest(MultisetDigest::scaled(c.first, table_version - r.table_version));
  digest_.add_digest(MultisetDigest::scaled(c.second, uint64_t{context_tokens} - r.context_tokens));
  r.table_version = table_version;
  r.context_tokens = context_tokens;
}

// A table cell (request, group, logical block) -> slot. The slot's
// generation is the block's own entry, so the cell does not repeat it.
inline StateDigest BlockAllocator::cell_image(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) const {
  return MultisetDigest::pair_image(allocator_digest::kTagCell | (uint64_t{g} << 32) | index,
                                    (uint64_t{j} << 32) | slot);
}

// A block: one counter word (block_counter: generation and valid rows) with
// its coefficient, plus a term for its cached identity when it has one. The
// pool's set of blocks is fixed by its configuration, so a block's entry
// carries no identity term of its own.
inline StateDigest BlockAllocator::block_coefficient(uint32_t g, uint32_t slot) const {
  return MultisetDigest::coefficient(allocator_digest::kTagBlock, (uint64_t{g} << 32) | slot);
}

inline StateDigest BlockAllocator::cache_key_image(uint32_t g, uint32_t slot, CacheKey cache_key) const {
  if (cache_key == kNoCacheKey) return StateDigest{};
  return MultisetDigest::pair_image(allocator_digest::kTagBlock | (uint64_t{g} << 32) | slot, cache_key.value);
}

inline StateDigest BlockAllocator::block_image(uint32_t g, uint32_t slot) const {
  const BlockMeta& b = pools_[g].blocks[slot];
  const StateDigest counters =
      MultisetDigest::scaled(block_coefficient(g, slot), block_counter(b.generation, b.valid_rows));
  const StateDigest key = cache_key_image(g, slot, b.cache_key);
  return StateDigest{counters.lo + key.lo, counters.hi + key.hi};
}

inline void BlockAllocator::set_valid_rows(uint32_t g, uint32_t slot, uint16_t valid_rows) {
  BlockMeta& b = pools_[g].blocks[slot];
  const uint64_t step = block_counter(0, valid_rows) - block_counter(0, b.valid_rows);
  digest_.add_digest(MultisetDigest::scaled(block_coefficient(g, slot), step));
  b.valid_rows = valid_rows;
}

inline void BlockAllocator::set_cache_key(uint32_t g, uint32_t slot, CacheKey cache_key) {
  BlockMeta& b = pools_[g].blocks[slot];
  digest_.remove_digest(cache_key_image(g, slot, b.cache_key));
  digest_.add_digest(cache_key_image(g, slot, cache_key));
  b.cache_key = cache_key;
}

inline void BlockAllocator::add_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) {
  const StateDigest image = cell_image(index, g, j, slot);
  digest_.add_digest(image);
  requests_[index].cells.add_digest(image);
}

inline void BlockAllocator::remove_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) {
  const StateDigest image = cell_image(index, g, j, slot);
  digest_.remove_digest(image);
  requests_[index].cells.remove_digest(image);
}

inline void BlockAllocator::enqueue_unreferenced(uint32_t g, uint32_t slot, BlockState state) {
  Pool& p = pools_[g];
  if (state == BlockState::free && !single_queue())
    p.free_ring.push_back(slot);
  else
    p.lru_queue.push_back(slot, links_of(g));
}

inline void BlockAllocator::requeue_front(uint32_t g, uint32_t slot, BlockState state) {
  Pool& p = pools_[g];
  if (state == BlockState::free && !single_queue())
    p.free_ring.push_front(slot);
  else
    p.lru_queue.push_front(slot, links_of(g));
}

inline bool BlockAllocator::pop_unreferenced(uint32_t g, uint32_t& slot) {
  Pool& p = pools_[g];
  if (!p.free_ring.empty()) {
    slot = p.free_ring.pop_front();
    return true;
  }
  if (p.lru_queue.empty()) return false;
  slot = p.lru_queue.pop_front(links_of(g));
  return true;
}

inline bool BlockAllocator::reserve_block(uint32_t g, std::vector<Reservation>& log) {
  uint32_t slot;
  if (!pop_unreferenced(g, slot)) return false;
  Pool& p = pools_[g];
  BlockMeta& b = p.blocks[slot];
  const BlockState from = b.state;  // free or evictable (either policy)
  log.push_back(Reservation{slot, static_cast<uint16_t>(g), from});
  // Unpublished: not reachable from any request map, not in any queue. The
  // digest is untouched until publication, so rollback restores it exactly.
  if (from == BlockState::evictable) --p.evictable;
  b.state = BlockState::reserved;
  ++p.in_transaction;
  return true;
}

// Publication of one reservation whose evicted identity, if any, has been
// recorded (record_eviction).
inline StateDigest BlockAllocator::recycle_block(uint32_t g, uint32_t slot, uint16_t valid_rows) {
  BlockMeta& b = pools_[g].blocks[slot];
  // Recycled to a new owner: a new generation, no cached identity, and a
  // valid-row frontier that hides whatever the old owner wrote (0x05E, 0x05F).
  // The digest moves by the step of the block's counter word.
  const uint64_t step = block_counter(b.generation + 1, valid_rows) - block_counter(b.generation, b.valid_rows);
  b.generation += 1;
  b.cache_key = kNoCacheKey;
  b.valid_rows = valid_rows;
  b.refcount = 1;
  b.state = BlockState::live;
  return MultisetDigest::scaled(block_coefficient(g, slot), step);
}

inline void BlockAllocator::publish_reserved(const Reservation& r, uint16_t valid_rows) {
  Pool& p = pools_[r.group_index];
  digest_.add_digest(recycle_block(r.group_index, r.slot, valid_rows));
  --p.in_transaction;
  p.gain_live(1);
}

inline void BlockAllocator::add_ref(uint32_t g, uint32_t slot) {
  Pool& p = pools_[g];
  BlockMeta& b = p.blocks[slot];
  if (b.refcount == 0) {
    KVRT_ASSERT(b.state == BlockState::evictable, "add_ref on a block that is neither live nor evictable");
    p.lru_queue.remove(slot, links_of(g));
    --p.evictable;
    b.state = BlockState::live;
    p.gain_live(1);
  }
  ++b.refcount;
}

// Drops one strong reference of a LIVE block; returns the block's state
// after it: LIVE while references remain, else FREE or EVICTABLE (0x04B: a
// cache index entry is a weak identity; zero refs + key = EVICTABLE). Pool
// counters and queues are the caller's (drop_ref, or release_tables in bulk).
inline BlockState BlockAllocator::unreference(BlockMeta& b) {
  KVRT_ASSERT(b.refcount > 0 && b.state == BlockState::live, "reference dropped from an unreferenced block");
  if (--b.refcount == 0) b.state = b.cache_key != kNoCacheKey ? BlockState::evictable : BlockState::free;
  return b.state;
}

inline void BlockAllocator::drop_ref(uint32_t g, uint32_t slot) {
  Pool& p = pools_[g];
  const BlockState after = unreference(p.blocks[slot]);
  if (after == BlockState::live) return;
  --p.live;
  if (after == BlockState::evictable) ++p.evictable;
  enqueue_unreferenced(g, slot, after);
}

inline void BlockAllocator::begin_receipt(AllocationReceipt& out, AllocationOperation op, const RequestRecord*) {
  out.transaction_id = TransactionId{next_transaction_++};
  out.operation = op;
  out.predecessor_digest = state_digest();
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

inline void BlockAllocator::finish_receipt(AllocationReceipt& out, const RequestRecord* r, uint32_t index) {
  if (r != nullptr) {
    out.request_id = RequestId{index};
    out.request_generation = RequestGeneration{r->generation};
    out.table_version_after = TableVersion{r->table_version};
    out.context_tokens_after = r->context_tokens;
  }
  out.successor_digest = state_digest();
  out.allocator_epoch_after = Epoch{epoch_};
}

inline void BlockAllocator::record_delta(std::vector<RefcountDelta>& deltas, uint32_t g, uint32_t slot, uint32_t before,
                                         uint32_t after) const {
  deltas.push_back(RefcountDelta{handle_of(g, slot), before, after});
}

}  // namespace kvrt
