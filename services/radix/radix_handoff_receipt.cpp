#include "services/radix/radix_handoff_receipt.hpp"

#include "services/common/units.hpp"
#include "services/prefix/prefix_match_receipt.hpp"

namespace kvrt {

Sha256Digest canonical_digest(const RadixSchedulerHandoffReceipt& r) {
  // Every field except receipt_sha256, in declaration order, each tagged
  // (digest.hpp). The match enters by its own canonical digest and the
  // digest it carries, so a match edited without its digest also changes
  // this one.
  CanonicalWriter w("kvrt.RadixSchedulerHandoffReceipt.v1");
  w.digest("match", canonical_digest(r.match))
      .digest("match_receipt_sha256", r.match.receipt_sha256)
      .u64("tree_version", r.tree_version.value);
  w.begin_list("path_node_ids", r.path_node_ids.size());
  for (RadixNodeId id : r.path_node_ids) w.u64("node", id.value);
  w.u64("terminal_node_id", r.terminal_node_id.value)
      .u32("suffix_begin", r.suffix_interval.begin)
      .u32("suffix_end", r.suffix_interval.end)
      .u64("lock_lease_id", r.lock_lease_id.value)
      .u8("lock_required_until_scheduler_disposition", r.lock_required_until_scheduler_disposition ? 1 : 0)
      .str("scheduler_owner", kHandoffSchedulerOwner)
      .str("policy_decision", kHandoffPolicyDecision)
      .u32("free_private_tail_slots", r.free_private_tail_slots)
      .u64("new_useful_kv_bytes", r.new_useful_kv_bytes)
      .u32("new_physical_blocks", r.new_physical_blocks)
      .u64("new_physical_capacity_bytes", r.new_physical_capacity_bytes);
  return w.finish();
}

HandoffEstimates handoff_estimates(uint32_t prompt_tokens, uint32_t matched_tokens, uint32_t free_private_tail_slots,
                                   uint32_t block_tokens, uint64_t row_bytes) {
  const uint64_t to_compute = prompt_tokens - matched_tokens;
  const uint64_t uncovered = to_compute > free_private_tail_slots ? to_compute - free_private_tail_slots : 0;
  HandoffEstimates e;
  e.new_useful_kv_bytes = to_compute * row_bytes;
  e.new_physical_blocks = static_cast<uint32_t>(ceil_div(uncovered, uint64_t{block_tokens}));
  e.new_physical_capacity_bytes = uint64_t{e.new_physical_blocks} * block_tokens * row_bytes;
  return e;
}

}  // namespace kvrt
