// RadixIndex::validate(): the owner-level laws of spec 0x08A and 0x08D,
// re-derived from the tree's edges, the pool's slot states and the leases.
#include <string>
#include <unordered_map>

#include "tests/spec_lab/radix_index.hpp"

namespace kvrt {

Status RadixIndex::validate() const {
  auto broken = [](const std::string& what) {
    return make_error(ErrorCode::invariant_violated, "radix index invariant: " + what, "validate");
  };
  KVRT_TRY(tree_.validate());
  KVRT_TRY(pool_.validate());

  // Pool partition: T is exactly the slots on the tree's edges, each
  // recorded with the token it holds at its path depth.
  uint64_t edge_slots = 0;
  std::string slot_error;
  tree_.for_each_node([&](RadixNodeRef, const RadixNode& n) {
    for (uint32_t k = 0; k < n.length() && slot_error.empty(); ++k) {
      const TokenSlotId s = n.edge.slots()[k];
      ++edge_slots;
      if (!pool_.contains(s) || pool_.state(s) != SlotState::tree_owned)
        slot_error = "slot " + std::to_string(s.value) + " on node " + std::to_string(n.id.value) +
                     " is not tree-owned in the pool";
    }
  });
  if (!slot_error.empty()) return broken(slot_error);
  if (edge_slots != pool_.tree_count())
    return broken("tree-owned slots " + std::to_string(pool_.tree_count()) + " != slots on edges " +
                  std::to_string(edge_slots));
  if (tree_.ledger().total_tokens != pool_.tree_count()) return broken("total tokens != tree-owned slots");
  if (pool_.tree_count() + pool_.private_count() + pool_.free_count() != pool_.size())
    return broken("T + R + F != pool");
  // The pool digest binds (slot, token, depth); recompute it from the edges.
  {
    TokenSlotPool replay(pool_.size());
    std::unordered_map<uint64_t, RequestId> private_owner;
    for (uint32_t s = 1; s <= pool_.size(); ++s)
      if (pool_.state(TokenSlotId{s}) == SlotState::request_private)
        replay.claim(TokenSlotId{s}, pool_.private_owner(TokenSlotId{s}));
    tree_.for_each_node([&](RadixNodeRef, const RadixNode& n) {
      for (uint32_t k = 0; k < n.length(); ++k) {
        replay.claim(n.edge.slots()[k], RequestId{});
        replay.adopt(n.edge.slots()[k], n.edge.tokens()[k], n.depth + k);
      }
    });
    if (replay.state_digest() != pool_.state_digest())
      return broken("a tree-owned slot records another token or depth");
  }

  // Locks: lock(v) = number of leases whose path root -> terminal contains v.
  std::unordered_map<uint64_t, uint32_t> derived_locks;  // node id -> leases through it
  MultisetDigest lease_digest;
  for (const auto& [id, l] : leases_) {
    if (!tree_.is_live(l.terminal)) return broken("lease " + std::to_string(id) + " names a node that is gone");
    if (tree_.node(l.terminal).end_depth() != l.matched)
      return broken("lease " + std::to_string(id) + " matched length disagrees with its path");
    if (!l.terminal.is_root() && tree_.node(l.terminal).extra_key != l.extra_key)
      return broken("lease " + std::to_string(id) + " extra key disagrees with its path");
    for (RadixNodeRef v = l.terminal; !v.is_root(); v = tree_.parent_of(v)) ++derived_locks[v.id.value];
    lease_digest.add(lease_entry(l));
  }
  std::string lock_error;
  tree_.for_each_node([&](RadixNodeRef, const RadixNode& n) {
    const auto it = derived_locks.find(n.id.value);
    const uint32_t expected = it == derived_locks.end() ? 0 : it->second;
    if (n.lock_count != expected && lock_error.empty())
      lock_error = "node " + std::to_string(n.id.value) + " lock count " + std::to_string(n.lock_count) +
                   " != " + std::to_string(expected) + " leases through it (0x08D)";
  });
  if (!lock_error.empty()) return broken(lock_error);
  if (lease_digest.value() != lease_digest_.value()) return broken("lease digest drifted");
  return Status::success();
}

}  // namespace kvrt
