#pragma once
// RadixHandoffLabReceipt (spec 0x08G): the radix index's immutable
// physical answer to "what prefix of this request is cached, where, and under
// which lock". It is a handoff, not a schedule: the scheduler (M5.2) owns the
// decision, so the spec's constant fields scheduler_owner = "M5.2" and
// policy_decision = None are a type-level fact here (kSchedulerOwner; no
// policy field exists) and are still covered by the receipt digest.
//
// The prefill and capacity estimates of 0x08G are carried beside the match so
// that M5.2 need not re-derive them from the layout manifest.
#include <cstdint>
#include <string_view>
#include <vector>

#include "schema/common_types.hpp"
#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

struct RadixHandoffLabReceipt {
  static constexpr std::string_view kSchedulerOwner = "M5.2";

  RequestId request_id;
  RequestGeneration request_generation;                   // 0x08G example: 4
  TreeVersion tree_version;                               // committed tree the match read (example: 18)
  Sha256Digest tree_state_sha256;                         // digest of that committed tree state
  uint32_t prompt_tokens = 0;                             // S_prompt [tokens]
  uint32_t matched_tokens = 0;                            // [tokens] (example: 6)
  std::vector<TokenSlotId> prefix_slot_ids;               // one K/V token slot per matched token
                                                          // (page size 1, 0x08A) [slots]
  std::vector<RadixNodeId> path_node_ids;                 // non-root nodes root -> terminal (example: 2,3,4)
  RadixNodeId terminal_node_id;                           // last node of the path (example: 4)
  TokenInterval suffix_interval;                          // prompt rows still to compute (example: [6, 7))
  LeaseId lock_lease_id;                                  // lock reference protecting the path (0x08D)
  bool lock_required_until_scheduler_disposition = true;  // M5.2 must retain or release it
  // 0x08G estimates, physical evidence only:
  uint32_t free_private_tail_slots = 0;      // writable rows the request already owns [rows]
  uint64_t new_useful_kv_bytes = 0;          // (S_prompt - matched) * B_row [bytes]
  uint32_t new_physical_blocks = 0;          // ceil(max(to_compute - free_tail, 0) / P) [blocks]
  uint64_t new_physical_capacity_bytes = 0;  // new_physical_blocks * P * B_row [bytes]
  Sha256Digest receipt_sha256;               // canonical_digest() of every other field

  // Canonical SHA-256 over every field except receipt_sha256, including the
  // constant scheduler owner.
  Sha256Digest canonical_digest() const;

  friend bool operator==(const RadixHandoffLabReceipt&, const RadixHandoffLabReceipt&) = default;
};

}  // namespace kvrt
