#pragma once
// CapacityPressureMonitor: notices when work keeps being refused for
// capacity with nothing released in between. Requests that wait for one
// another's releases make progress on their own; only refusals piling up
// with no release in between mean the pools are held by something that will
// not let go by itself: the radix index's cache, whose leased pages the
// allocator's LRU cannot evict (0x08E). The monitor then names, once, about
// how many blocks per group the refused work lacks, so the index can give
// that many back, leaf first.
#include <cstdint>
#include <optional>

#include "schema/allocator_types.hpp"

namespace kvrt {

class CapacityPressureMonitor {
 public:
  // Refusals for capacity with no release in between before the index
  // hears of them. A burst of requests racing for the last blocks stays
  // well below it; a stuck node reaches it within a few scheduler steps.
  static constexpr uint32_t kStuckRefusals = 32;

  // Observes one applied batch (outcomes[i] answers ops[i]) of an allocator
  // with `block_tokens` tokens per block. A release resets the count; a
  // refused allocate counts the blocks per group its prompt needs, a refused
  // append one. Answers the blocks per group missing when the refusals
  // reach kStuckRefusals (and starts counting again), nothing otherwise.
  std::optional<uint32_t> observe(const AllocatorBatch& batch, const AllocatorBatchReceipt& receipt,
                                  uint32_t block_tokens);

  uint32_t refusals_since_release() const { return refusals_since_release_; }

 private:
  uint32_t refusals_since_release_ = 0;
  uint32_t missing_blocks_ = 0;  // the most any refusal since the last release lacked [blocks per group]
};

}  // namespace kvrt
