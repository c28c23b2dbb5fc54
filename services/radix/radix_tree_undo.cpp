// RadixTree::undo_insert: a withdrawn insertion taken back node for node
// (0x04F: a failed transaction leaves its predecessor). Removing the new leaf
// alone would leave the split the insert made in an existing edge (a later
// eviction would give that edge back in two steps instead of one) and its
// recency stamps on the walked path (another LRU order): a tree that never
// saw the insert makes other choices. Undone here in the reverse order of
// insert(): the walked nodes' stamps, the leaf, the split, then the clock and
// the id counter.
#include <vector>

#include "services/radix/radix_tree.hpp"

namespace kvrt {

bool RadixTree::undo_insert(const RadixInsertUndo& undo, RadixEvictionSink* sink) {
  if (undo.mutations != mutations_) return false;
  // Stamps and priorities first, while every walked node is still where the
  // insert found it (a split's shared node is not among them: it is new).
  for (auto it = undo.walked.rbegin(); it != undo.walked.rend(); ++it) {
    RadixNode& n = nodes_[it->index];
    n.last_access = it->last_access;
    n.priority = it->priority;
    if (it->index == kRootIndex) continue;  // never digested for recency, never a candidate
    refresh_image(it->index);
    refresh_candidate(it->index);
  }
  if (undo.leaf) {
    KVRT_ASSERT(is_live(*undo.leaf), "undo_insert: the leaf left the tree, yet nothing changed it");
    RadixEvictResult removed;
    remove_leaf(undo.leaf->index, sink, removed);
  }
  if (undo.split_shared) {
    // Join the shared node's edge and its only child's again; the child is
    // the node that was split and keeps its id, counts and stamps.
    const NodeIndex pi = *undo.split_shared, ci = *undo.split_child;
    RadixNode& shared = nodes_[pi];
    RadixNode& child = nodes_[ci];
    KVRT_ASSERT(shared.child_count == 1 && child.parent == pi, "undo_insert: the split node gained children");
    const uint32_t at = shared.length();
    std::vector<TokenId> tokens(shared.edge.tokens().begin(), shared.edge.tokens().end());
    std::vector<TokenSlotId> slots(shared.edge.slots().begin(), shared.edge.slots().end());
    tokens.insert(tokens.end(), child.edge.tokens().begin(), child.edge.tokens().end());
    slots.insert(slots.end(), child.edge.slots().begin(), child.edge.slots().end());
    EdgeSegment joined(edges_, tokens, slots);
    children_.erase(child.selector, ci);
    children_.replace(shared.selector, pi, ci);
    child.selector = shared.selector;
    child.first_page_fingerprint = shared.first_page_fingerprint;
    child.parent = shared.parent;
    child.depth = shared.depth;
    child.edge.release(edges_);
    child.edge = std::move(joined);
    if (order_.contains(ci)) ledger_.leaf_ready_tokens += at;  // the leaf has its whole edge again
    --ledger_.nodes;
    digest_.remove_digest(shared.image);
    shared.edge.release(edges_);
    shared.image = StateDigest{};
    shared.parent = kNoNode;
    shared.child_count = 0;
    shared.live = false;  // allocate_node() rewrites every other field
    free_nodes_.release(pi);
    refresh_image(ci);
  }
  clock_ = undo.clock;
  next_node_id_ = undo.next_node_id;
  ++mutations_;
  return true;
}

}  // namespace kvrt
