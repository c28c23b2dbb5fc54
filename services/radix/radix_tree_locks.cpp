// RadixTree lock references (spec 0x08D): a lock counts on every node of the
// path terminal -> root, so an ancestor shared by two running requests holds
// two references; nodes going 0 <-> 1 move their tokens between the
// evictable and protected ledgers and leave or rejoin the eviction order.
#include <string>

#include "services/radix/radix_tree.hpp"

namespace kvrt {

Result<int64_t> RadixTree::inc_lock(RadixNodeRef terminal) {
  ++mutations_;
  if (!is_live(terminal))
    return make_error(ErrorCode::unknown_node, "node " + std::to_string(terminal.id.value) + " is not in the tree",
                      "terminal");
  // Tokens moved evictable -> protected, summed in a local so that the walk
  // does not store to the ledger at every node.
  uint64_t moved = 0;
  for (NodeIndex i = terminal.index; i != kRootIndex;) {
    RadixNode& n = nodes_[i];
    if (n.lock_count++ == 0) {
      moved += n.length();
      if (n.child_count == 0) remove_candidate(i);  // candidates are exactly the unlocked leaves
    }
    i = n.parent;
  }
  ledger_.evictable_tokens -= moved;
  ledger_.protected_tokens += moved;
  return -static_cast<int64_t>(moved);
}

Result<int64_t> RadixTree::dec_lock(RadixNodeRef terminal) {
  ++mutations_;
  if (!is_live(terminal))
    return make_error(ErrorCode::unknown_node, "node " + std::to_string(terminal.id.value) + " is not in the tree",
                      "terminal");
  if (!terminal.is_root() && nodes_[terminal.index].lock_count == 0)
    return make_error(ErrorCode::lock_underflow,
                      "node " + std::to_string(terminal.id.value) + " holds no lock reference to release", "terminal");
  uint64_t moved = 0;  // tokens moved protected -> evictable
  for (NodeIndex i = terminal.index; i != kRootIndex;) {
    RadixNode& n = nodes_[i];
    // lock(parent) >= lock(child) (0x08D), so the terminal check covers the path.
    KVRT_ASSERT(n.lock_count > 0, "lock count of an ancestor is below its descendant's");
    if (--n.lock_count == 0) {
      moved += n.length();
      if (n.child_count == 0) add_candidate(i);
    }
    i = n.parent;
  }
  ledger_.evictable_tokens += moved;
  ledger_.protected_tokens -= moved;
  return static_cast<int64_t>(moved);
}

}  // namespace kvrt
