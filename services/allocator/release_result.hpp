#pragma once
// ReleaseResult (spec 0x00C "immutable allocation/release receipt", 0x05E):
// what dropping a request's strong references did to physical state. The spec
// names the record but gives no field list; it is rebuilt here from 0x05E:
// release and cancel share reference mechanics but report different reasons,
// truncate removes only a suffix, and a full cached block whose last
// reference goes becomes EVICTABLE rather than FREE (0x04B).
#include <cstdint>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/state_digest.hpp"
#include "services/allocator/allocation_receipt.hpp"
#include "services/common/physical_block_handle.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

// The service-level reason that makes two physically identical releases
// different receipts (0x05E). Numeric values travel in the schema.
enum class ReleaseReason : uint8_t {
  finished = 0,   // normal release of a completed request
  cancelled = 1,  // the client or scheduler cancelled the request
  truncated = 2,  // suffix truncation; the request stays alive with a shorter context
  preempted = 3,  // M5.2 preempted the request; its rows must be recomputed or reloaded
};
inline constexpr uint8_t kReleaseReasonMax = 3;

struct ReleaseResult {
  TransactionId transaction_id;
  RequestId request_id;
  RequestGeneration request_generation;  // generation whose references were dropped
  ReleaseReason reason = ReleaseReason::finished;
  StateDigest predecessor_digest;                      // committed allocator state before (state_digest.hpp)
  StateDigest successor_digest;                        // committed allocator state after
  uint32_t context_tokens_before = 0;                  // logical length before [tokens]
  uint32_t context_tokens_after = 0;                   // kept length [tokens]: 0 unless truncated
  TableVersion table_version_after;                    // truncate publishes a new table version
  std::vector<RefcountDelta> refcount_deltas;          // every handle whose count dropped
  std::vector<PhysicalBlockHandle> freed_handles;      // reached zero refs with no cache key: FREE
  std::vector<PhysicalBlockHandle> evictable_handles;  // reached zero refs with a cache key: EVICTABLE
  Epoch allocator_epoch_after;

  friend bool operator==(const ReleaseResult&, const ReleaseResult&) = default;
};

}  // namespace kvrt
