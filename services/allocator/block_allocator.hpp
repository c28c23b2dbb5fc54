#pragma once
// BlockAllocator: the allocator owner's core (spec 0x04, 0x05, 0x09C).
//
// It owns, for every cache group, a pool of generation-fenced blocks, their
// refcounts, the free and evictable queues, and every request's per-group
// block table. Each operation is a transaction against expected versions that
// either publishes one complete successor (all cache groups together) and
// fills an immutable receipt, or leaves the committed state exactly as it was:
//   - a caller error (stale handle, stale version, malformed transition)
//     returns a typed Error before anything changes;
//   - running out of capacity is a normal outcome (receipt outcome
//     out_of_capacity), nothing changes;
//   - a failure inside a multi-step transaction before publication (an armed
//     fault point) rolls back to the exact predecessor digest (0x04F).
//
// Conservation law, checked by validate():
//   free + evictable + live + (reserved | copying | ready) == capacity, per pool
//   refcount(b) == request-map references + active leases          (0x04B)
//   refcount 0 with a cache key <=> EVICTABLE; without one <=> FREE
//
// Epoch: advances by one for every committed transaction that changes which
// physical blocks are owned (a block taken from a pool, returned to it, or a
// cached identity evicted). Writing into an already owned tail or adding a
// reference does not advance it. This reproduces 0x05B, where A's private
// append and the fork leave epoch 43 and D's COW moves it 43 -> 44.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "services/allocator/allocator_config.hpp"
#include "services/allocator/block_queue.hpp"
#include "services/allocator/block_quota_gate.hpp"
#include "services/allocator/free_block_ring.hpp"
#include "services/allocator/payload_store.hpp"
#include "services/common/fault_points.hpp"
#include "services/common/result.hpp"
#include "services/common/state_digest.hpp"

namespace kvrt {

// Committed block states (FREE, EVICTABLE, LIVE) and the transaction phases a
// block passes through while unpublished (0x04A). Never renumber.
enum class BlockState : uint8_t { free = 0, evictable = 1, live = 2, reserved = 3, copying = 4, ready = 5 };

// Per-block metadata, 32 bytes.
struct BlockMeta {
  QueueLinks links;         // free or evictable queue membership
  CacheKey cache_key;       // weak cache identity from the prefix index; kNoCacheKey = none
  uint32_t refcount = 0;    // request-map references + active leases
  uint32_t generation = 1;  // advanced when the block is recycled to a new owner
  uint16_t valid_rows = 0;  // committed K/V rows [0, valid_rows) [rows]
  BlockState state = BlockState::free;
  // Set only inside resolve_bundles, to find a block named twice in one
  // request without a side table; zero between calls (validate() checks).
  uint8_t named_in_call = 0;
};
static_assert(sizeof(BlockMeta) == 32);

// A lease: a temporary strong reference that keeps a block from being
// recycled while a reader or copier uses it (0x04B, 0x05C step 4).
struct BlockLease {
  LeaseId id;
  PhysicalBlockHandle handle;
};

// Something the index owners must hear about, drained by the caller
// (docs/conventions.md habit 6).
struct AllocatorEvent {
  enum class Kind : uint8_t { cache_key_evicted = 0 };
  Kind kind = Kind::cache_key_evicted;
  PhysicalBlockHandle handle;  // the block as it was when its identity was dropped
  CacheKey cache_key;
};

struct AllocateArgs {
  uint32_t prompt_rows = 0;  // logical rows of the new request [tokens]
  // Prefix-hit bundles taken by reference, bundle-major: entry i*G + g is
  // bundle i of cache group g. Each must be a valid, current block holding
  // every row the prompt sees in it.
  std::span<const PhysicalBlockHandle> prefix_hit;
  std::optional<Epoch> expected_epoch;
  const BlockQuotaGate* quota = nullptr;  // asked before the capacity check; none: no quota
  // The copy-rows intent of an immutable partial tail (0x07D): v in (0, P)
  // makes the last prefix_hit bundle a source, not a reference. Its rows
  // [0, v) are copied into the request's own fresh bundle at that position,
  // which starts with v valid rows; the tail keeps its own references. 0:
  // every bundle is shared.
  uint32_t copy_tail_rows = 0;
};

struct AppendArgs {
  RequestFence fence;
  // K/V rows of the appended token for each cache group (B_row,g bytes each),
  // written through the payload store and published as valid. Empty: the
  // caller writes them at the receipt's slot and publishes with commit_rows.
  std::span<const std::span<const uint8_t>> rows;
  std::optional<Epoch> expected_epoch;
  const BlockQuotaGate* quota = nullptr;  // asked on the new-bundle and copy-on-write paths
};

struct ForkArgs {
  RequestFence parent;
};

struct TruncateArgs {
  RequestFence fence;
  uint32_t from_token = 0;  // first removed position [tokens]
  uint32_t to_token = 0;    // one past the last removed position; must equal the context (suffix only)
};

struct ReleaseArgs {
  RequestFence fence;
  ReleaseReason reason = ReleaseReason::finished;  // finished or cancelled
};

struct TouchArgs {
  RequestFence fence;
  std::span<const PhysicalBlockHandle> bundles;  // bundle-major, as in AllocateArgs
  const BlockQuotaGate* quota = nullptr;
};

struct CommitRowsArgs {
  RequestFence fence;
  uint32_t valid_through = 0;  // rows [0, valid_through) of the request are now written [tokens]
};

// The transaction bodies without the answer's move, for `kvrt bench
// allocator` only (bench/allocator_bench.cpp defines it): the benchmark times
// the core's work in place, and in a row of its own what the public
// Result-returning call adds to it.
struct BlockAllocatorBodies;

class BlockAllocator {
 public:
  static Result<BlockAllocator> create(BlockAllocatorConfig config, BlockPayloadStore* store = nullptr);

  // --- transactions ----------------------------------------------------------
  // Every operation answers Result<Receipt>: an error (typed, state unchanged)
  // or a receipt saying what happened (committed, rolled back, out of capacity).
  // `recycled` lends the vectors of an earlier receipt so a caller in a loop
  // allocates nothing (the benchmarks do); its contents are overwritten.
  Result<AllocationReceipt> allocate(const AllocateArgs& args, AllocationReceipt&& recycled = {});
  Result<AllocationReceipt> append(const AppendArgs& args, AllocationReceipt&& recycled = {});
  Result<AllocationReceipt> fork(const ForkArgs& args, AllocationReceipt&& recycled = {});
  Result<AllocationReceipt> touch(const TouchArgs& args, AllocationReceipt&& recycled = {});
  Result<AllocationReceipt> commit_rows(const CommitRowsArgs& args, AllocationReceipt&& recycled = {});
  Result<ReleaseResult> truncate(const TruncateArgs& args, ReleaseResult&& recycled = {});
  Result<ReleaseResult> release(const ReleaseArgs& args, ReleaseResult&& recycled = {});
  Result<AllocationReceipt> evict(const PhysicalBlockHandle& handle, AllocationReceipt&& recycled = {});
  Result<AllocationReceipt> publish_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key,
                                              AllocationReceipt&& recycled = {});
  Result<BlockLease> acquire_lease(const PhysicalBlockHandle& handle);
  Status release_lease(LeaseId lease);

  // --- queries ---------------------------------------------------------------
  Epoch epoch() const { return Epoch{epoch_}; }
  // O(1): the incrementally maintained digest.
  StateDigest state_digest() const {
    MultisetDigest d = digest_;
    d.add_digest(epoch_image_);
    return d.value();
  }
  uint32_t group_count() const { return static_cast<uint32_t>(pools_.size()); }
  uint32_t block_size() const { return config_.block_size; }
  const BlockAllocatorConfig& config() const { return config_; }
  uint32_t capacity_blocks() const { return pools_.empty() ? 0 : pools_[0].capacity(); }
  struct PoolCounts {
    uint32_t free = 0, evictable = 0, live = 0, in_transaction = 0;
    uint32_t peak_live = 0;  // most blocks LIVE at once since the pool was created
  };
  PoolCounts counts(uint32_t group_index) const;
  // The request's current table of one group as handles, or an error.
  Result<std::vector<PhysicalBlockHandle>> table(RequestId request, uint32_t group_index) const;
  Result<RequestFence> fence(RequestId request) const;
  Result<uint32_t> context_tokens(RequestId request) const;
  Result<BlockMeta> block(const PhysicalBlockHandle& handle) const;
  // True when `handle` is current (pool, group, block and generation resolve)
  // and its block carries `cache_key` (non-zero): the prefix index's
  // generation fence on every hit block (0x07C), with no error built on the
  // lookup's hot path.
  bool holds_cache_key(const PhysicalBlockHandle& handle, CacheKey cache_key) const noexcept;
  PhysicalBlockHandle handle_of(uint32_t group_index, uint32_t slot) const;
  uint32_t live_requests() const { return open_requests_; }
  uint32_t active_leases() const { return active_leases_; }
  std::vector<AllocatorEvent> drain_events();
  // Cache identities dropped so far (evicted or recycled), drained or not:
  // an index that has absorbed exactly this many events holds only current
  // handles, so its hot walk may skip the per-block generation fence
  // (holds_cache_key).
  uint64_t cache_keys_dropped() const { return drained_events_ + events_.size(); }
  // A purge's step 5 with overwrite (0x0CE: stale bytes never become
  // visible to a new owner because an id was recycled): every block is
  // zeroed before it is next handed out, whoever held it, and whether it is
  // free, cached or still referenced now. The allocator does not know which
  // namespace wrote a block, so it marks all of them; a mark costs one
  // zeroing, once. Returns the blocks marked (0 without a payload store:
  // there are no bytes to overwrite). Not part of the state digest: it
  // changes bytes, not who holds what.
  uint64_t mark_all_for_overwrite();
  // The same for the named blocks only, as (group index, slot) (BlockResidue:
  // the blocks that may hold one namespace's rows). Returns the blocks newly
  // marked; out-of-range pairs are ignored.
  uint64_t mark_for_overwrite(std::span<const std::pair<uint32_t, uint32_t>> blocks);
  uint64_t overwrite_pending_blocks() const { return overwrite_pending_count_; }
  uint64_t overwritten_blocks() const { return overwritten_blocks_; }
  FaultPoints& faults() { return faults_; }
  const FaultPoints& faults() const { return faults_; }
  // The names faults() can arm: one point per cache group, between reserving
  // that group's blocks and the next group's (0x04F: a later group's failure
  // must undo the earlier groups' reservations).
  std::vector<std::string> fault_point_names() const;

  // Full re-derivation (docs/conventions.md habit 2): refcounts from reachability, queue
  // membership and order-free partition counts, cross-group table lengths and
  // valid rows, and the digest recomputed from scratch.
  Status validate() const;
  StateDigest recompute_digest() const;

 private:
  struct Pool {
    GroupPoolConfig config;
    std::vector<BlockMeta> blocks;
    // Unreferenced blocks wait in one of two queues. Under the default policy
    // FREE blocks wait in free_ring (taken first) and EVICTABLE ones in
    // lru_queue, oldest first; under single_lru_queue every unreferenced block,
    // cached or not, waits in lru_queue in release order and free_ring is unused.
    FreeBlockRing free_ring;
    BlockQueue lru_queue;
    uint32_t live = 0;
    uint32_t peak_live = 0;  // high-water mark of live since creation [blocks]
    uint32_t evictable = 0;  // blocks in state EVICTABLE
    uint32_t in_transaction = 0;
    uint32_t capacity() const { return static_cast<uint32_t>(blocks.size()); }
    uint32_t unreferenced() const { return free_ring.size() + lru_queue.size(); }
    // Every block that turns LIVE goes through here, so the peak is exact
    // (a report's peak utilisation needs no lucky sample).
    void gain_live(uint32_t n) {
      live += n;
      if (live > peak_live) peak_live = live;
    }
  };
  struct RequestRecord {
    RequestId id;
    uint32_t generation = 0;
    uint64_t table_version = 0;
    uint32_t context_tokens = 0;
    bool open = false;
    std::vector<std::vector<uint32_t>> tables;  // [group][logical block] -> slot
    // Sum of this request's table-cell images, so that releasing the request
    // leaves the state digest in O(1) instead of O(blocks).
    MultisetDigest cells;
  };
  struct Lease {
    PhysicalBlockHandle handle;
    uint32_t group_index = 0;
    uint32_t slot = 0;
    uint32_t generation = 0;  // of the lease slot, fences a recycled LeaseId
    bool active = false;
  };
  // A reservation made inside a transaction, undone in reverse order on rollback.
  struct Reservation {
    uint32_t slot;
    uint16_t group_index;
    BlockState from_state;  // free or evictable; the block's generation, frontier and
                            // identity stay untouched until publication
    uint8_t pad = 0;
  };

  friend struct BlockAllocatorBodies;
  BlockAllocator() = default;
  // The transactions' bodies: each fills `out` only when it returns ok.
  Status allocate_into(const AllocateArgs& args, AllocationReceipt& out);
  Status append_into(const AppendArgs& args, AllocationReceipt& out);
  Status fork_into(const ForkArgs& args, AllocationReceipt& out);
  Status touch_into(const TouchArgs& args, AllocationReceipt& out);
  Status commit_rows_into(const CommitRowsArgs& args, AllocationReceipt& out);
  Status truncate_into(const TruncateArgs& args, ReleaseResult& out);
  Status release_into(const ReleaseArgs& args, ReleaseResult& out);
  Status evict_into(const PhysicalBlockHandle& handle, AllocationReceipt& out);
  Status publish_cache_key_into(const PhysicalBlockHandle& handle, CacheKey cache_key, AllocationReceipt& out);
  bool single_queue() const { return config_.queue_policy == FreeQueuePolicy::single_lru_queue; }
  auto links_of(uint32_t g) {
    return [this, g](uint32_t b) -> QueueLinks& { return pools_[g].blocks[b].links; };
  }
  // Queue upkeep of an unreferenced block of `state` (free or evictable).
  void enqueue_unreferenced(uint32_t g, uint32_t slot, BlockState state);
  void requeue_front(uint32_t g, uint32_t slot, BlockState state);  // exact undo of a pop
  // Takes the block a reservation gets: FREE first, then the oldest EVICTABLE
  //; the front of the one queue under single_lru_queue.
  bool pop_unreferenced(uint32_t g, uint32_t& slot);
  bool fence_current(const RequestFence& f) const {
    const uint64_t index = f.request.value;
    return index < requests_.size() && requests_[index].open && requests_[index].generation == f.generation.value &&
           requests_[index].table_version == f.table_version.value;
  }
  Status check_fence(const RequestFence& f) const;
  Status check_epoch(const std::optional<Epoch>& expected) const;
  Result<uint32_t> resolve(const PhysicalBlockHandle& h, uint32_t expected_group_index) const;
  uint32_t group_index_of(CacheGroupId g) const;

  // Reservation of one bundle (one block per group) as unpublished, with the
  // named fault points after each group. Returns false on capacity shortage
  // (everything already reserved is rolled back by the caller).
  bool reserve_block(uint32_t g, std::vector<Reservation>& log);
  void rollback(std::vector<Reservation>& log);
  // Reserves `per_group` blocks in every group (scratch_log_), firing the
  // after_reserve_group_<g> fault points; on a fault it rolls back, marks the
  // receipt rolled_back and returns false.
  bool reserve_bundles(uint32_t per_group, AllocationReceipt& out);
  // Publishes one reservation: records an evicted identity and the 0 -> 1
  // reference delta in the receipt, and returns the new handle.
  PhysicalBlockHandle publish_fresh(const Reservation& r, uint16_t valid_rows, AllocationReceipt& out);
  void publish_reserved(const Reservation& r, uint16_t valid_rows);
  // The block part of publishing a reservation (generation, identity,
  // frontier, reference); returns the digest step, which the caller adds.
  StateDigest recycle_block(uint32_t g, uint32_t slot, uint16_t valid_rows);
  // Publishes every reservation of scratch_log_ as the next table entries of
  // request `index`, each with `valid_rows` rows (allocate, new-bundle append).
  void publish_fresh_blocks(uint32_t index, uint16_t valid_rows, AllocationReceipt& out);
  // An evictable reservation's dropped identity: event, receipt, digest.
  void record_eviction(const Reservation& r, AllocationReceipt& out);
  // append's three paths (0x04E), chosen by append() from the request's tail.
  // `rows` is the appended token's K/V per group, or empty.
  Status check_append_rows(std::span<const std::span<const uint8_t>> rows) const;
  void append_new_bundle(uint32_t index, std::span<const std::span<const uint8_t>> rows, AllocationReceipt& out);
  void append_private_tail(uint32_t index, uint32_t offset, std::span<const std::span<const uint8_t>> rows,
                           AllocationReceipt& out);
  Status append_copy_on_write(uint32_t index, uint32_t offset, std::span<const std::span<const uint8_t>> rows,
                              const BlockQuotaGate* quota, AllocationReceipt& out);
  bool available_for(uint32_t bundles) const;

  // Reference changes of committed blocks, with queue and digest upkeep.
  void add_ref(uint32_t g, uint32_t slot);
  void drop_ref(uint32_t g, uint32_t slot);
  static BlockState unreference(BlockMeta& b);

  // Digest images (state_digest.hpp): request header, table cell, block,
  // lease. A block's generation and valid rows (one packed counter word) and a
  // request's table version and length are counters with coefficients
  // (MultisetDigest::coefficient(s)), so the hot paths change the digest by a
  // step instead of removing and adding two images.
  StateDigest request_image(uint32_t index) const;
  MultisetDigest::Coefficients request_coefficients(uint32_t index) const;
  StateDigest cell_image(uint32_t index, uint32_t g, uint32_t j, uint32_t slot) const;
  StateDigest block_image(uint32_t g, uint32_t slot) const;
  StateDigest block_coefficient(uint32_t g, uint32_t slot) const;
  // A block's counters packed injectively into one word: generation in the low
  // 32 bits, valid rows above them.
  static uint64_t block_counter(uint32_t generation, uint16_t valid_rows) {
    return (uint64_t{valid_rows} << 32) | generation;
  }
  StateDigest cache_key_image(uint32_t g, uint32_t slot, CacheKey cache_key) const;  // 0 for no key
  MultisetDigest::Entry lease_entry(uint32_t index) const;
  void add_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot);
  void remove_cell(uint32_t index, uint32_t g, uint32_t j, uint32_t slot);
  // Committed-state setters that keep the digest: every change of these
  // fields goes through them.
  void set_valid_rows(uint32_t g, uint32_t slot, uint16_t valid_rows);
  void set_cache_key(uint32_t g, uint32_t slot, CacheKey cache_key);
  void set_request_counters(uint32_t index, uint64_t table_version, uint32_t context_tokens);

  void begin_receipt(AllocationReceipt& out, AllocationOperation op, const RequestRecord* r);
  void finish_receipt(AllocationReceipt& out, const RequestRecord* r, uint32_t index);
  void record_delta(std::vector<RefcountDelta>& deltas, uint32_t g, uint32_t slot, uint32_t before,
                    uint32_t after) const;
  Status release_tables(uint32_t index, uint32_t keep_blocks, ReleaseResult& out);
  void bump_epoch() {
    ++epoch_;
    epoch_image_ = epoch_image(epoch_);
  }
  static StateDigest epoch_image(uint64_t epoch);
  // Fault point "<prefix><group>" (e.g. after_reserve_group_0); one branch when disarmed.
  bool fault(const char* prefix, uint32_t g);
  // Takes a request slot (a recycled one gets the next generation); false when
  // every slot is in use, which is a capacity outcome.
  bool take_request_slot(uint32_t& index);
  void out_of_capacity(AllocationReceipt& out, AllocationOperation op, const char* why);
  // Asks `gate` (none: admitted); on a refusal fills a quota_exceeded
  // receipt that changes nothing and returns true.
  bool quota_refused(const BlockQuotaGate* gate, const QuotaCharge& charge, AllocationReceipt& out,
                     AllocationOperation op);
  // Resolves bundle-major handles into slots (scratch_slots_), checking groups,
  // generations, committed state, duplicates and that each block's valid rows
  // cover `rows_needed(i)`.
  template <class RowsNeeded>
  Status resolve_bundles(std::span<const PhysicalBlockHandle> handles, RowsNeeded rows_needed);
  // The copy-rows intent's arguments (allocate with copy_tail_rows > 0).
  Status check_copy_tail(const AllocateArgs& a, uint32_t hit_bundles) const;
  void unlink_evictable_hits();  // scratch_slots_ with refcount 0 leave the evictable queue (logged)
  void relink_evictable_hits();  // exact undo of unlink_evictable_hits
  uint64_t bundle_row_bytes() const;

  BlockAllocatorConfig config_;
  BlockPayloadStore* store_ = nullptr;
  std::vector<Pool> pools_;
  std::vector<RequestRecord> requests_;
  std::vector<uint32_t> free_request_slots_;
  uint32_t open_requests_ = 0;
  std::vector<Lease> leases_;
  std::vector<uint32_t> free_lease_slots_;
  uint32_t active_leases_ = 0;
  uint64_t epoch_ = 1;
  StateDigest epoch_image_;  // image of the epoch entry, cached: receipts read the digest twice
  uint64_t next_transaction_ = 1;
  MultisetDigest digest_;
  FaultPoints faults_;
  std::vector<AllocatorEvent> events_;
  uint64_t drained_events_ = 0;  // events handed out by drain_events() [events]
  std::vector<Reservation> scratch_log_;
  std::vector<uint32_t> scratch_slots_;         // resolved bundle slots, bundle-major
  std::vector<uint32_t> scratch_unreferenced_;  // blocks a release left unreferenced, in order
  std::vector<std::pair<uint32_t, BlockQueue::Unlinked>> scratch_unlinked_;
  std::vector<std::vector<uint8_t>> overwrite_pending_;  // [group][slot]: zero before the next hand-out
  uint64_t overwrite_pending_count_ = 0;
  uint64_t overwritten_blocks_ = 0;  // blocks zeroed because of a mark
};

// The public transactions: thin wrappers that lend `recycled` to the body and
// hand it back inside the answer. One move in, none out (the answer is
// returned in place): the receipt's vectors are handed on, never copied.
inline Result<AllocationReceipt> BlockAllocator::allocate(const AllocateArgs& args, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = allocate_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::append(const AppendArgs& args, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = append_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::fork(const ForkArgs& args, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = fork_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::touch(const TouchArgs& args, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = touch_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::commit_rows(const CommitRowsArgs& args, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = commit_rows_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<ReleaseResult> BlockAllocator::truncate(const TruncateArgs& args, ReleaseResult&& recycled) {
  Result<ReleaseResult> answer{std::move(recycled)};
  if (Status status = truncate_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<ReleaseResult> BlockAllocator::release(const ReleaseArgs& args, ReleaseResult&& recycled) {
  Result<ReleaseResult> answer{std::move(recycled)};
  if (Status status = release_into(args, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::evict(const PhysicalBlockHandle& handle,
                                                       AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = evict_into(handle, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline Result<AllocationReceipt> BlockAllocator::publish_cache_key(const PhysicalBlockHandle& handle,
                                                                   CacheKey cache_key, AllocationReceipt&& recycled) {
  Result<AllocationReceipt> answer{std::move(recycled)};
  if (Status status = publish_cache_key_into(handle, cache_key, *answer); !status.ok()) answer = status.error();
  return answer;
}

inline PhysicalBlockHandle BlockAllocator::handle_of(uint32_t g, uint32_t slot) const {
  const Pool& p = pools_[g];
  return PhysicalBlockHandle{p.config.pool, p.config.group, PhysicalBlockId{p.config.block_id_base + slot},
                             BlockGeneration{p.blocks[slot].generation}};
}

inline bool BlockAllocator::holds_cache_key(const PhysicalBlockHandle& h, CacheKey cache_key) const noexcept {
  for (const Pool& p : pools_) {
    if (p.config.group != h.group) continue;
    // A block id below the base wraps to a huge slot and fails the bound.
    const uint64_t slot = uint64_t{h.block.value} - p.config.block_id_base;
    if (p.config.pool != h.pool || slot >= p.blocks.size()) return false;
    const BlockMeta& b = p.blocks[slot];
    return cache_key != kNoCacheKey && b.generation == h.generation.value && b.cache_key == cache_key;
  }
  return false;
}

}  // namespace kvrt
