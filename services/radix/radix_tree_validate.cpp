// RadixTree::validate(): re-derives every conservation law of radix_tree.hpp
// from the node arena alone, never from the incrementally kept counters it
// checks (docs/conventions.md habit 2).
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>

#include "services/radix/radix_tree.hpp"

namespace kvrt {

namespace {
Error broken(const std::string& what) {
  return make_error(ErrorCode::invariant_violated, "radix tree invariant: " + what, "validate");
}
std::string node_name(const RadixNode& n) { return "node " + std::to_string(n.id.value); }
}  // namespace

Status RadixTree::validate() const {
  const uint32_t page = options_.page_size;
  if (nodes_.empty() || !nodes_[kRootIndex].live || nodes_[kRootIndex].parent != kNoNode ||
      nodes_[kRootIndex].length() != 0 || nodes_[kRootIndex].id != RadixNodeId{0})
    return broken("the root is missing or malformed");

  RadixLedger derived;
  std::vector<uint32_t> child_counts(nodes_.size(), 0);
  std::vector<uint64_t> child_locks(nodes_.size(), 0);
  std::unordered_set<uint64_t> slots_seen;
  std::unordered_set<uint64_t> ids_seen;
  size_t free_count = 0;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const RadixNode& n = nodes_[i];
    if (!n.live) {
      ++free_count;
      if (!n.edge.empty() || n.parent != kNoNode || n.image != StateDigest{} ||
          order_.contains(static_cast<NodeIndex>(i)))
        return broken("a free arena slot holds state");
      continue;
    }
    if (!ids_seen.insert(n.id.value).second || n.id.value == 0 || n.id.value >= next_node_id_)
      return broken(node_name(n) + " has a duplicate or unissued id");
    if (n.parent == kNoNode || n.parent >= nodes_.size() || !nodes_[n.parent].live)
      return broken(node_name(n) + " has no live parent");
    const RadixNode& p = nodes_[n.parent];
    if (n.length() == 0) return broken(node_name(n) + " has an empty edge");
    if (n.length() % page != 0)
      return broken(node_name(n) + " edge of " + std::to_string(n.length()) + " tokens is not page aligned");
    if (n.depth != p.end_depth()) return broken(node_name(n) + " depth disagrees with its parent's path");
    if (n.parent != kRootIndex && n.extra_key != p.extra_key)
      return broken(node_name(n) + " extra key differs from its parent's");
    if (n.last_access > clock_ || n.created > clock_) return broken(node_name(n) + " carries a future tick");
    if (page_fingerprint(n.edge.token_data()) != n.first_page_fingerprint || n.selector != selector_of(n))
      return broken(node_name(n) + " cached edge fingerprints are stale");
    ++child_counts[n.parent];
    child_locks[n.parent] += n.lock_count;
    for (TokenSlotId s : n.edge.slots())
      if (!slots_seen.insert(s.value).second)
        return broken("slot " + std::to_string(s.value) + " is owned by two edges (0x08A)");
    derived.total_tokens += n.length();
    derived.nodes += 1;
    if (n.lock_count > 0)
      derived.protected_tokens += n.length();
    else
      derived.evictable_tokens += n.length();
  }
  if (free_count != free_nodes_.size()) return broken("free-node list disagrees with the arena");
  if (!free_nodes_.consistent()) return broken("free-node indices lost their lowest-first order");

  // Locks: lock(v) = leases terminating at v + sum of the children's locks.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const RadixNode& n = nodes_[i];
    if (!n.live) continue;
    if (n.child_count != child_counts[i]) return broken(node_name(n) + " child count is stale");
    if (i != kRootIndex && n.lock_count < child_locks[i])
      return broken(node_name(n) + " lock count is below the sum of its children's (0x08D)");
  }

  // Child selectors: one entry per non-root node, hashed from its current
  // (parent, extra key, first page), unique among siblings.
  if (children_.size() != derived.nodes) return broken("child selector count differs from the node count");
  std::unordered_set<uint32_t> selected;
  std::string selector_error;
  children_.for_each([&](uint64_t hash, uint32_t c) {
    if (!selector_error.empty()) return;
    if (c >= nodes_.size() || !nodes_[c].live || c == kRootIndex) {
      selector_error = "a selector names a dead node";
      return;
    }
    const RadixNode& n = nodes_[c];
    if (hash != selector_hash(n.parent, n.extra_key, n.edge.token_data()))
      selector_error = node_name(n) + " selector is not keyed by its first page";
    else if (!selected.insert(c).second)
      selector_error = node_name(n) + " is selected twice";
    else if (find_child(n.parent, n.extra_key, n.edge.token_data()) != c)
      selector_error = node_name(n) + " shares its (extra key, first page) with a sibling";
  });
  if (!selector_error.empty()) return broken(selector_error);

  // Eviction order: exactly the unlocked leaves, with current, unique keys.
  if (!order_.consistent()) return broken("eviction order heap is inconsistent");
  std::vector<EvictionKey> keys;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const RadixNode& n = nodes_[i];
    const bool candidate = n.live && n.lock_count == 0 && n.child_count == 0;
    if (candidate != order_.contains(static_cast<NodeIndex>(i)))
      return broken(node_name(n) + (candidate ? " is an unlocked leaf missing from" : " must not be in") +
                    " the eviction order");
    if (!candidate) continue;
    if (order_.key_of(static_cast<NodeIndex>(i)) != eviction_key(n))
      return broken(node_name(n) + " eviction key is stale");
    keys.push_back(eviction_key(n));
    derived.leaf_ready_tokens += n.length();
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
    return broken("two eviction candidates share a key; the victim order would not be total");

  if (derived != ledger_)
    return broken("ledgers drifted: evictable " + std::to_string(ledger_.evictable_tokens) + " vs " +
                  std::to_string(derived.evictable_tokens) + ", protected " + std::to_string(ledger_.protected_tokens) +
                  " vs " + std::to_string(derived.protected_tokens) + ", leaf_ready " +
                  std::to_string(ledger_.leaf_ready_tokens) + " vs " + std::to_string(derived.leaf_ready_tokens) +
                  ", nodes " + std::to_string(ledger_.nodes) + " vs " + std::to_string(derived.nodes));

  MultisetDigest recomputed;
  for (size_t i = 1; i < nodes_.size(); ++i)
    if (nodes_[i].live) {
      const StateDigest image = MultisetDigest::image(node_entry(nodes_[i]));
      if (image != nodes_[i].image) return broken(node_name(nodes_[i]) + " cached digest image is stale");
      recomputed.add_digest(image);
    }
  if (recomputed.value() != digest_.value()) return broken("state digest differs from the recomputed one");
  return Status::success();
}

}  // namespace kvrt
