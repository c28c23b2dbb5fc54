// The immutable scheduler handoff of spec 0x08G: a match frozen into a
// RadixHandoffLabReceipt backed by a lock lease. M5.2 must dispose of
// the lease: release() when it rejects or defers the request, admit_handoff()
// when it admits it. A receipt read against a tree version that has moved is
// a stale read and is rejected.
#include <string>

#include "services/common/units.hpp"
#include "tests/spec_lab/radix_index.hpp"

namespace kvrt {

Result<RadixHandoff> RadixIndex::handoff(const RadixHandoffArgs& a) {
  if (a.prompt.size() > UINT32_MAX)
    return make_error(ErrorCode::invalid_argument, "prompt longer than 2^32 tokens", "prompt");
  RadixHandoff out;
  RadixMutationReceipt& r = out.mutation;
  r = begin(RadixMutationKind::handoff, a.request);
  const RadixMatchResult m = tree_.match(RadixKeyView{a.prompt, a.extra_key}, &r.prefix_slots);
  fill_match(r, m);
  const LeaseId lease_id = grant(a.request, RadixLeaseKind::handoff, m, a.extra_key, r);
  commit(r);

  RadixHandoffLabReceipt& h = out.receipt;
  h.request_id = a.request.id;
  h.request_generation = a.request.generation;
  h.tree_version = version_;
  h.tree_state_sha256 = state_sha256();
  h.prompt_tokens = static_cast<uint32_t>(a.prompt.size());
  h.matched_tokens = m.matched;
  h.prefix_slot_ids = r.prefix_slots;
  h.path_node_ids = tree_.path_ids(m.terminal);
  h.terminal_node_id = m.terminal.id;
  h.suffix_interval = TokenInterval{m.matched, h.prompt_tokens};
  h.lock_lease_id = lease_id;
  h.lock_required_until_scheduler_disposition = true;
  // 0x08G estimates, kept separate from the match:
  //   to_compute = S_prompt - matched_tokens
  //   new_useful_KV_bytes = to_compute * B_row
  //   new_physical_blocks = ceil(max(to_compute - free_private_tail_slots, 0) / P)
  //   new_physical_capacity_bytes = new_physical_blocks * P * B_row
  const uint64_t page = tree_.options().page_size;
  const uint64_t to_compute = h.prompt_tokens - h.matched_tokens;
  h.free_private_tail_slots = a.free_private_tail_slots;
  h.new_useful_kv_bytes = to_compute * row_bytes_;
  const uint64_t uncovered = to_compute > a.free_private_tail_slots ? to_compute - a.free_private_tail_slots : 0;
  h.new_physical_blocks = static_cast<uint32_t>(ceil_div(uncovered, page));
  h.new_physical_capacity_bytes = uint64_t{h.new_physical_blocks} * page * row_bytes_;
  h.receipt_sha256 = h.canonical_digest();
  return out;
}

Status RadixIndex::verify_handoff(const RadixHandoffLabReceipt& h) const {
  if (h.receipt_sha256 != h.canonical_digest())
    return make_error(ErrorCode::receipt_tampered, "receipt_sha256 does not cover the receipt's fields",
                      "receipt_sha256");
  if (h.tree_version != version_)
    return make_error(ErrorCode::stale_tree_version,
                      "receipt read tree version " + std::to_string(h.tree_version.value) + "; the tree is at " +
                          std::to_string(version_.value) + " (stale read, 0x08G)",
                      "tree_version");
  if (h.tree_state_sha256 != state_sha256())
    return make_error(ErrorCode::receipt_tampered, "tree_state_sha256 names a state this index never committed",
                      "tree_state_sha256");
  KVRT_TRY(check_lease(h.lock_lease_id, RadixRequestRef{h.request_id, h.request_generation}, RadixLeaseKind::handoff));
  const RadixLease& l = *lease(h.lock_lease_id);
  if (h.terminal_node_id != l.terminal.id || h.path_node_ids != tree_.path_ids(l.terminal))
    return make_error(ErrorCode::path_slot_mismatch, "path_node_ids/terminal_node_id are not the leased path",
                      "path_node_ids");
  if (h.matched_tokens != l.matched || h.prefix_slot_ids != tree_.path_slots(l.terminal))
    return make_error(ErrorCode::path_slot_mismatch,
                      "prefix_slot_ids/matched_tokens are not the slots of the leased path (0x08A S(u))",
                      "prefix_slot_ids");
  if (h.prompt_tokens < h.matched_tokens || h.suffix_interval != TokenInterval{h.matched_tokens, h.prompt_tokens})
    return make_error(ErrorCode::path_slot_mismatch,
                      "suffix_interval must be [matched_tokens, prompt_tokens) = [" + std::to_string(h.matched_tokens) +
                          ", " + std::to_string(h.prompt_tokens) + ")",
                      "suffix_interval");
  return Status::success();
}

Result<RadixMutationReceipt> RadixIndex::admit_handoff(const RadixHandoffLabReceipt& h) {
  KVRT_TRY(verify_handoff(h));
  const RadixLease handed = *lease(h.lock_lease_id);
  RadixMutationReceipt r = begin(RadixMutationKind::admit_handoff, handed.request);
  r.matched_tokens = handed.matched;
  r.terminal_node = handed.terminal.id;
  r.prefix_slots = h.prefix_slot_ids;
  // Exchange: the lock reference stays on the path; only its holder's kind
  // and name change, so no lock count moves.
  RadixLease admitted = handed;
  admitted.id = LeaseId{next_lease_++};
  admitted.kind = RadixLeaseKind::request;
  admitted.granted_at = TreeVersion{version_.value + 1};
  lease_digest_.remove(lease_entry(handed));
  leases_.erase(handed.id.value);
  lease_digest_.add(lease_entry(admitted));
  leases_.emplace(admitted.id.value, admitted);
  r.lease = admitted.id;
  r.exchanged_from = handed.id;
  r.lease_terminal_before = handed.terminal.id;
  r.lease_terminal_after = admitted.terminal.id;
  commit(r);
  return r;
}

}  // namespace kvrt
