#pragma once
// RadixSchedulerHandoffReceipt (spec 0x08G) is declared in schema/prefix.capnp;
// this is its canonical digest and the estimates 0x08G keeps beside the match.
#include <cstdint>
#include <string_view>

#include "schema/prefix_types.hpp"
#include "services/common/digest.hpp"

namespace kvrt {

// 0x08G's constant fields: the scheduler owns the decision, the index makes
// none. They are part of the type, not of the message, and the digest
// covers them so that a receipt cannot be read as anything else.
inline constexpr std::string_view kHandoffSchedulerOwner = "M5.2";
inline constexpr std::string_view kHandoffPolicyDecision = "none";

// Canonical SHA-256 over every field of `r` except receipt_sha256 (the
// embedded match receipt with its own digest), and the constants above.
Sha256Digest canonical_digest(const RadixSchedulerHandoffReceipt& r);

// The prefill and capacity estimates of 0x08G, physical evidence only:
//   to_compute                  = S_prompt - matched_tokens
//   new_useful_KV_bytes         = to_compute * B_row
//   new_physical_blocks         = ceil(max(to_compute - free_private_tail_slots, 0) / P)
//   new_physical_capacity_bytes = new_physical_blocks * P * B_row
struct HandoffEstimates {
  uint64_t new_useful_kv_bytes = 0;          // [bytes]
  uint32_t new_physical_blocks = 0;          // [blocks]
  uint64_t new_physical_capacity_bytes = 0;  // [bytes]
};
// prompt >= matched; P > 0 [tokens]; row_bytes: B_row summed over the cache groups [bytes / token].
HandoffEstimates handoff_estimates(uint32_t prompt_tokens, uint32_t matched_tokens, uint32_t free_private_tail_slots,
                                   uint32_t block_tokens, uint64_t row_bytes);

}  // namespace kvrt
