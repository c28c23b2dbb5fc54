#include "services/allocator/capacity_pressure_monitor.hpp"

#include <algorithm>
#include <variant>

namespace kvrt {

std::optional<uint32_t> CapacityPressureMonitor::observe(const AllocatorBatch& batch,
                                                         const AllocatorBatchReceipt& receipt, uint32_t block_tokens) {
  const uint32_t P = std::max<uint32_t>(block_tokens, 1);
  for (size_t i = 0; i < receipt.outcomes.size() && i < batch.ops.size(); ++i) {
    if (std::holds_alternative<ReleaseResult>(receipt.outcomes[i])) {
      refusals_since_release_ = 0;
      missing_blocks_ = 0;
      continue;
    }
    const auto* r = std::get_if<AllocationReceipt>(&receipt.outcomes[i]);
    if (r == nullptr || r->outcome != AllocationOutcome::out_of_capacity) continue;
    ++refusals_since_release_;
    const auto* a = std::get_if<AllocateOp>(&batch.ops[i]);
    missing_blocks_ = std::max(missing_blocks_, a != nullptr ? (a->prompt_rows + P - 1) / P : 1u);
  }
  if (refusals_since_release_ < kStuckRefusals) return std::nullopt;
  refusals_since_release_ = 0;
  return missing_blocks_;
}

}  // namespace kvrt
