#pragma once
// PrefetchingBacking: asynchronous mapping one step ahead (spec 0x06D) as a
// PageBacking decorator, so VmmMapper's decisions stay single-threaded and
// identical to the synchronous path.
//
// Split of work:
// - Owner thread (the mapper owner): every state transition, the plan
//   (VmmMapper::plan_frontier_mappings after publishing step t), and the
//   bookkeeping of what is prefetched (`prefetched_`, a PrefetchTable).
// - Background thread (AsyncMappingWorker): only the mmap / MAP_FIXED (or
//   cuMemMap) calls on (address, pool offset) pairs the owner decided.
//
// What is prefetched is invisible to the core. Each planned pair puts a handle
// the core counts as free behind an address the core counts as unmapped (one
// page beyond some active slot's frontier), so no published receipt and no
// valid row can observe it. When step t+1 asks for map(va, pool):
//   - if (va -> pool) is prefetched, the OS is already in the requested state:
//     no system call, the entry is consumed (a hit);
//   - otherwise the call maps synchronously; MAP_FIXED replaces any other
//     prefetched page at va, and a prefetched page showing the same pool
//     offset elsewhere is unmapped first, so a handle is never visible at two
//     addresses (a kernel out of bounds cannot alias another slot's page).
// Every call that touches the OS first awaits the batch in flight, so the OS
// operations on the reservation form one total order: background batch, then
// the owner's call. That is the "await receipt.mapping_complete" of 0x06D.
//
// Invariant (checked by tests after every transition): `prefetched_` lists
// exactly the OS mappings that exist at addresses the core counts as
// unmapped, each of a handle the core counts as free, each pool offset once.
#include <cstdint>
#include <memory>
#include <vector>

#include "services/mapper/async_mapping_worker.hpp"
#include "services/mapper/page_backing.hpp"
#include "services/mapper/prefetch_table.hpp"

namespace kvrt {

struct PrefetchStats {
  uint64_t planned = 0;              // pairs handed to prefetch() [mappings]
  uint64_t background_maps = 0;      // maps done by the background thread
  uint64_t background_unmaps = 0;    // stale prefetched pages revoked by it
  uint64_t background_failures = 0;  // background maps or unmaps the OS refused
  uint64_t hits = 0;                 // owner map() calls satisfied without a system call
  uint64_t foreground_maps = 0;      // owner map() calls that had to map synchronously
  uint64_t foreground_revokes = 0;   // prefetched pages the owner unmapped itself
  uint64_t await_ns = 0;             // owner time blocked waiting for a batch [ns]
  uint64_t background_ns = 0;        // background thread time executing jobs [ns]
  uint64_t batches = 0;              // batches handed to the background thread
  uint64_t wakeups = 0;              // of which to a parked thread (a system call each)
  bool thread_pinned = false;        // the thread runs on the CPU its options named
};

class PrefetchingBacking final : public PageBacking {
 public:
  // `thread`: how the background thread waits and where it runs
  // (async_mapping_worker.hpp); the default parks at once, unpinned.
  explicit PrefetchingBacking(std::unique_ptr<PageBacking> inner, AsyncMappingOptions thread = {});
  ~PrefetchingBacking() override;  // stops the thread before the inner backing goes
  PrefetchingBacking(const PrefetchingBacking&) = delete;
  PrefetchingBacking& operator=(const PrefetchingBacking&) = delete;

  // --- PageBacking (owner thread) -------------------------------------------
  Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) override;
  Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) override;
  Status unmap(uint64_t va_offset, uint64_t bytes) override;
  void release() override;
  std::byte* reservation_base() const override { return inner_->reservation_base(); }

  // --- one step ahead (owner thread) ----------------------------------------
  // Hands `plan` (from VmmMapper::plan_frontier_mappings, called right after a
  // step was published) to the background thread: revoke prefetched pages
  // the plan no longer names, then map the pairs not yet mapped. Returns at
  // once; the OS work happens while the next forward pass runs. A plan that
  // names a pair twice, or one pool offset at two addresses, is a caller
  // error (invalid_argument) and nothing is submitted.
  Status prefetch(const std::vector<PlannedMapping>& plan);
  // Awaits the batch in flight and absorbs its results (tests and benchmarks
  // call it before inspecting prefetched()).
  void settle();
  // Prefetched mappings as of the last settle.
  const PrefetchTable& prefetched() const { return prefetched_; }
  PrefetchStats stats() const;
  PageBacking& inner() { return *inner_; }

 private:
  void absorb(const std::vector<MappingJobResult>& results);
  Status revoke_pool_alias(uint64_t va_offset, uint64_t pool_offset);

  std::unique_ptr<PageBacking> inner_;
  std::unique_ptr<AsyncMappingWorker> worker_;
  PrefetchTable prefetched_;  // owner thread only
  PrefetchStats stats_;
  bool created_ = false;
  // Sticky: a prefetched page that could not be returned to reserved address
  // space. Every later OS call reports it instead of mapping around a hole.
  Status poisoned_ = Status::success();
};

}  // namespace kvrt
