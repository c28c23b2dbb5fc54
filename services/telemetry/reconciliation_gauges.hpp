#pragma once
// Reconciliation gauges of spec 0x0CF ("Observability Must Reconcile State"):
// gauges that must balance, so an imbalance is an alert, not a trend.
//
//   pool partition   N_pool = N_free + N_evictable + N_live + N_reserved-or-copying
//                    for a snapshot whose block states are mutually exclusive
//   refcount delta   Delta_ref = N_ref,recorded - N_ref,derived
//                    derived = request-map references + active leases (the
//                    Loop 5 convention, 0x04B); nonzero is an ownership alert
//   mapping lag      L_map = max(0, f_required - f_ready) [tokens]; positive
//                    blocks execution (0x06D map before use)
//
// The inputs are plain observations (what an owner reported), so the
// derivation is independent of the owner that keeps the recorded counts.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct BlockLease;

// The states of 0x04A: FREE, EVICTABLE and LIVE are committed; RESERVED and
// COPYING (and READY_TO_PUBLISH, reported as copying) are transaction phases.
enum class ObservedBlockState : uint8_t { free = 0, evictable = 1, live = 2, reserved = 3, copying = 4 };

struct BlockObservation {
  PhysicalBlockId block;
  ObservedBlockState state = ObservedBlockState::free;
  uint32_t recorded_refcount = 0;  // what the owner's metadata says [references]
};

struct PoolObservation {
  PoolId pool;
  uint32_t capacity_blocks = 0;                   // N_pool [blocks]
  std::vector<BlockObservation> blocks;           // one per physical block, each exactly once
  std::vector<PhysicalBlockId> request_map_refs;  // one entry per request block-table cell
  std::vector<PhysicalBlockId> lease_refs;        // one entry per active lease
};

struct PoolPartition {
  uint64_t pool = 0;                                                    // N_pool [blocks]
  uint64_t free = 0, evictable = 0, live = 0, reserved_or_copying = 0;  // [blocks]
  friend bool operator==(const PoolPartition&, const PoolPartition&) = default;
};

struct RefcountReconciliation {
  uint64_t recorded = 0;           // sum of recorded refcounts [references]
  uint64_t derived = 0;            // request-map cells + active leases [references]
  int64_t delta = 0;               // recorded - derived
  uint64_t blocks_with_drift = 0;  // blocks whose own recorded and derived counts differ; a
                                   // zero total delta can hide +1/-1 on two blocks
  friend bool operator==(const RefcountReconciliation&, const RefcountReconciliation&) = default;
};

// Counts the states. Errors (ErrorCode::ledger_identity_broken): a block
// observed twice, or a block count that is not capacity_blocks (the partition
// identity cannot hold over a partial snapshot).
Result<PoolPartition> pool_partition(const PoolObservation& pool);

// Errors (ErrorCode::ledger_identity_broken): a reference to a block that is
// not in the observation, or a block observed twice.
Result<RefcountReconciliation> reconcile_refcounts(const PoolObservation& pool);

// L_map = max(0, f_required - f_ready) [tokens].
inline uint64_t mapping_lag(uint64_t required_frontier_tokens, uint64_t ready_frontier_tokens) {
  return required_frontier_tokens > ready_frontier_tokens ? required_frontier_tokens - ready_frontier_tokens : 0;
}

}  // namespace kvrt
