#include "tests/spec_lab/radix_handoff_receipt.hpp"

namespace kvrt {

Sha256Digest RadixHandoffLabReceipt::canonical_digest() const {
  // Every field except receipt_sha256, plus the constant scheduler owner and
  // the absent policy decision (0x08G), so a receipt can never be re-labelled
  // as carrying a policy.
  CanonicalWriter w("kvrt.RadixHandoffLabReceipt.v1");
  w.u64("request_id", request_id.value)
      .u32("request_generation", request_generation.value)
      .u64("tree_version", tree_version.value)
      .digest("tree_state_sha256", tree_state_sha256)
      .u32("prompt_tokens", prompt_tokens)
      .u32("matched_tokens", matched_tokens);
  w.begin_list("prefix_slot_ids", prefix_slot_ids.size());
  for (auto s : prefix_slot_ids) w.u64("slot", s.value);
  w.begin_list("path_node_ids", path_node_ids.size());
  for (auto n : path_node_ids) w.u64("node", n.value);
  w.u64("terminal_node_id", terminal_node_id.value)
      .u32("suffix_begin", suffix_interval.begin)
      .u32("suffix_end", suffix_interval.end)
      .u64("lock_lease_id", lock_lease_id.value)
      .u8("lock_required_until_scheduler_disposition", lock_required_until_scheduler_disposition ? 1 : 0)
      .u32("free_private_tail_slots", free_private_tail_slots)
      .u64("new_useful_kv_bytes", new_useful_kv_bytes)
      .u32("new_physical_blocks", new_physical_blocks)
      .u64("new_physical_capacity_bytes", new_physical_capacity_bytes)
      .str("scheduler_owner", kSchedulerOwner)
      .str("policy_decision", "none");
  return w.finish();
}

}  // namespace kvrt
