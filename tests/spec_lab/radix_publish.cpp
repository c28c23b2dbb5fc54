// RadixIndex::publish: insert, duplicate release and request publication of
// spec 0x08C, as one checked transaction (the "stronger teaching
// transaction" of publish_unfinished):
//
//   predecessor = validate_tree_and_request(req)   -> every check below, before any write
//   reserve(append_slots)                          -> named free slots become private
//   prefix_len = insert(full_tokens, full_slots)
//   free(full_slots[protected_len:prefix_len])     -> S_duplicate back to the pool
//   (S_new = full_slots[prefix_len:] become tree-owned)
//   unfinished: re-match, move the lease to the new terminal
//   finished:   drop the lease
#include <string>
#include <unordered_set>

#include "tests/spec_lab/radix_index.hpp"

namespace kvrt {

Result<RadixMutationReceipt> RadixIndex::publish(const RadixPublishArgs& a) {
  const uint32_t page = tree_.options().page_size;
  // --- checks (no state is touched until all pass) ------------------------
  const RadixLease* held = nullptr;
  uint32_t protected_len = 0;
  if (a.lease) {
    KVRT_TRY(check_lease(*a.lease, a.request, RadixLeaseKind::request));
    held = lease(*a.lease);
    protected_len = held->matched;
    if (held->extra_key != a.extra_key)
      return make_error(ErrorCode::path_slot_mismatch, "the lease protects a path under another extra key",
                        "extra_key");
    if (a.tokens.size() < protected_len ||
        tree_.path_tokens(held->terminal) != std::vector<TokenId>(a.tokens.begin(), a.tokens.begin() + protected_len))
      return make_error(
          ErrorCode::path_slot_mismatch,
          "tokens do not extend the " + std::to_string(protected_len) + "-token path the request's lease protects",
          "tokens");
  }
  if (a.tokens.size() % page != 0)
    return make_error(ErrorCode::page_misaligned,
                      std::to_string(a.tokens.size()) + " tokens is not a multiple of the " + std::to_string(page) +
                          "-token page; every published boundary is page aligned (0x08)",
                      "tokens");
  if (a.tokens.size() > UINT32_MAX)
    return make_error(ErrorCode::invalid_argument, "sequence longer than 2^32 tokens", "tokens");
  if (a.append_slots.size() != a.tokens.size() - protected_len)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(a.append_slots.size()) + " append slots for " +
                          std::to_string(a.tokens.size() - protected_len) + " unprotected tokens",
                      "append_slots");
  std::unordered_set<uint64_t> seen;
  for (TokenSlotId s : a.append_slots) {
    const bool in_pool = pool_.contains(s);
    const bool usable =
        in_pool && (pool_.state(s) == SlotState::free ||
                    (pool_.state(s) == SlotState::request_private && pool_.private_owner(s) == a.request.id));
    if (!usable || !seen.insert(s.value).second)
      return make_error(ErrorCode::owned_slot_reuse,
                        "slot " + std::to_string(s.value) +
                            (!in_pool  ? " is outside the pool"
                             : !usable ? " is " + std::string(to_string(pool_.state(s))) +
                                             (pool_.state(s) == SlotState::request_private ? " to another request" : "")
                                       : " is listed twice") +
                            "; a slot has exactly one owner (0x08A)",
                        "append_slots");
  }

  // --- commit -------------------------------------------------------------
  const RadixMutationKind kind = a.publication == RadixPublication::finished ? RadixMutationKind::publish_finished
                                                                             : RadixMutationKind::publish_unfinished;
  RadixMutationReceipt r = begin(kind, a.request);
  r.protected_len = protected_len;
  for (TokenSlotId s : a.append_slots)
    if (pool_.state(s) == SlotState::free) {
      pool_.claim(s, a.request.id);
      r.reserved_slots.push_back(s);
    }
  std::vector<TokenSlotId> full_slots;
  if (held != nullptr) full_slots = tree_.path_slots(held->terminal);
  full_slots.insert(full_slots.end(), a.append_slots.begin(), a.append_slots.end());

  const RadixInsertResult ins =
      tree_.insert(RadixKeyView{a.tokens, a.extra_key}, full_slots, a.priority).value();  // sizes checked above
  KVRT_ASSERT(ins.prefix_len >= protected_len && ins.stored_len == a.tokens.size(),
              "a leased path is always cached and the sequence is page aligned");
  r.prefix_len = ins.prefix_len;
  if (ins.split) r.splits.push_back(*ins.split);
  if (ins.new_leaf) r.created_nodes.push_back(ins.new_leaf->id);
  for (uint32_t i = protected_len; i < ins.prefix_len; ++i) {
    pool_.release(full_slots[i]);
    r.duplicate_slots_released.push_back(full_slots[i]);
  }
  for (uint32_t i = ins.prefix_len; i < full_slots.size(); ++i) {
    pool_.adopt(full_slots[i], a.tokens[i], i);
    r.published_slots.push_back(full_slots[i]);
  }

  if (a.publication == RadixPublication::unfinished) {
    // SGLang cache_unfinished_req: re-match so the request references the
    // tree's slots, then move its lock to the new terminal.
    const RadixMatchResult m = tree_.match(RadixKeyView{a.tokens, a.extra_key}, &r.prefix_slots);
    KVRT_ASSERT(m.matched == a.tokens.size(), "a just-published sequence matches in full");
    fill_match(r, m);
    if (held != nullptr) {
      RadixLease& l = leases_.at(held->id.value);
      r.lease = l.id;
      r.lease_terminal_before = l.terminal.id;
      r.lease_terminal_after = m.terminal.id;
      // Lock the new terminal first: the shared path never passes through a
      // zero count, so nothing on it becomes evictable mid-move.
      r.evictable_delta += tree_.inc_lock(m.terminal).value();
      r.evictable_delta += tree_.dec_lock(l.terminal).value();
      lease_digest_.remove(lease_entry(l));
      l.terminal = m.terminal;
      l.matched = m.matched;
      lease_digest_.add(lease_entry(l));
    } else {
      grant(a.request, RadixLeaseKind::request, m, a.extra_key, r);
    }
  } else if (held != nullptr) {
    r.lease = held->id;
    r.lease_terminal_before = held->terminal.id;
    r.evictable_delta += tree_.dec_lock(held->terminal).value();
    lease_digest_.remove(lease_entry(*held));
    leases_.erase(held->id.value);
  }
  commit(r);
  return r;
}

}  // namespace kvrt
