// RadixTree eviction (spec 0x08E): the policy keys, the incrementally kept
// candidate order (exactly the unlocked leaves), and whole-edge removal that
// exposes parents within the same call.
#include <string>

#include "services/radix/radix_tree.hpp"

namespace kvrt {

EvictionKey RadixTree::eviction_key(const RadixNode& n) const {
  switch (options_.eviction) {
    case EvictionPolicy::lru:
      return {0, n.last_access};
    case EvictionPolicy::lfu:
      return {n.hits, n.last_access};
    case EvictionPolicy::fifo:
      return {0, n.created};
    case EvictionPolicy::mru:
      return {0, ~n.last_access};
    case EvictionPolicy::filo:
      return {0, ~n.created};
    case EvictionPolicy::priority:
      // Flip the sign bit so that signed priorities order as unsigned keys.
      return {static_cast<uint64_t>(n.priority) ^ (uint64_t{1} << 63), n.last_access};
    case EvictionPolicy::slru:
      return {n.hits >= options_.slru_protected_hits ? 1u : 0u, n.last_access};
  }
  KVRT_ASSERT(false, "unhandled eviction policy");
  return {};
}

void RadixTree::add_candidate(NodeIndex i) {
  order_.push(i, eviction_key(nodes_[i]));
  ledger_.leaf_ready_tokens += nodes_[i].length();
}

void RadixTree::remove_candidate(NodeIndex i) {
  order_.erase(i);
  ledger_.leaf_ready_tokens -= nodes_[i].length();
}

void RadixTree::refresh_candidate(NodeIndex i) {
  if (order_.contains(i)) order_.update(i, eviction_key(nodes_[i]));
}

void RadixTree::remove_leaf(NodeIndex i, RadixEvictionSink* sink, RadixEvictResult& result) {
  RadixNode& n = nodes_[i];
  KVRT_ASSERT(n.lock_count == 0 && n.child_count == 0 && i != kRootIndex, "only unlocked leaves are evicted");
  const NodeIndex pi = n.parent;
  if (sink != nullptr)
    sink->evicted(RadixEvictedEdge{n.id, nodes_[pi].id, n.depth, n.extra_key, n.edge.tokens(), n.edge.slots()});
  if (order_.contains(i)) remove_candidate(i);
  children_.erase(n.selector, i);
  digest_.remove_digest(n.image);
  const uint32_t len = n.length();
  ledger_.evictable_tokens -= len;
  ledger_.total_tokens -= len;
  --ledger_.nodes;
  result.evicted_tokens += len;
  ++result.evicted_nodes;
  n.edge.release(edges_);  // recycled without touching the edge's memory
  n.parent = kNoNode;
  n.image = StateDigest{};
  n.live = false;  // the next allocate_node() rewrites every other field
  free_nodes_.release(i);

  RadixNode& p = nodes_[pi];
  --p.child_count;
  // 0x08E: a parent that becomes an unlocked leaf joins the candidates now.
  if (pi != kRootIndex && p.child_count == 0 && p.lock_count == 0) add_candidate(pi);
}

RadixEvictResult RadixTree::evict(uint64_t target_tokens, RadixEvictionSink* sink) {
  ++mutations_;
  RadixEvictResult result;
  while (result.evicted_tokens < target_tokens && !order_.empty()) {
    // Asked before the pop: a victim taken from the order must leave the tree.
    if (sink != nullptr && sink->interrupted()) [[unlikely]]
      break;
    // A victim's removal reads line 1 of its node, its parent's and its
    // child-selector entry; cold, each is a DRAM round trip. The next
    // victims are known a few pops ahead (the run, eviction_order.hpp):
    // start loading their node lines now, so that by the time each is the
    // top its line is here and its parent's loads can start early.
    order_.for_each_upcoming(kEvictLookahead, [&](NodeIndex next) { __builtin_prefetch(&nodes_[next]); });
    const NodeIndex victim = order_.pop();
    ledger_.leaf_ready_tokens -= nodes_[victim].length();
    remove_leaf(victim, sink, result);
    if (!order_.empty()) {
      // The next victim's line was requested at least one iteration ago:
      // start its parent and child-selector loads before the next pop.
      const RadixNode& next = nodes_[order_.top()];
      __builtin_prefetch(&nodes_[next.parent]);
      children_.prefetch(next.selector);
    }
  }
  return result;
}

RadixEvictResult RadixTree::evict_extra_key(uint64_t extra_key, RadixEvictionSink* sink) {
  ++mutations_;
  RadixEvictResult result;
  auto removable = [&](NodeIndex i) {
    const RadixNode& n = nodes_[i];
    return i != kRootIndex && n.live && n.extra_key == extra_key && n.child_count == 0 && n.lock_count == 0;
  };
  std::vector<NodeIndex> work;
  for (size_t i = 1; i < nodes_.size(); ++i)
    if (removable(static_cast<NodeIndex>(i))) work.push_back(static_cast<NodeIndex>(i));
  while (!work.empty()) {
    const NodeIndex i = work.back();
    work.pop_back();
    const NodeIndex parent = nodes_[i].parent;
    remove_leaf(i, sink, result);
    if (removable(parent)) work.push_back(parent);
  }
  return result;
}

size_t RadixTree::count_extra_key(uint64_t extra_key) const {
  size_t n = 0;
  for (size_t i = 1; i < nodes_.size(); ++i) n += nodes_[i].live && nodes_[i].extra_key == extra_key ? 1 : 0;
  return n;
}

Result<RadixEvictResult> RadixTree::evict_leaf(RadixNodeId id, RadixEvictionSink* sink) {
  ++mutations_;
  const std::string name = "node " + std::to_string(id.value);
  if (id.value == 0) return make_error(ErrorCode::internal_node_eviction, "the root is never evicted", "node");
  const std::optional<RadixNodeRef> ref = find(id);
  if (!ref) return make_error(ErrorCode::unknown_node, name + " is not in the tree", "node");
  const RadixNode& n = nodes_[ref->index];
  if (n.lock_count > 0)
    return make_error(ErrorCode::locked_node_eviction,
                      name + " is protected by " + std::to_string(n.lock_count) + " lock reference(s) (0x08D)", "node");
  if (n.child_count > 0)
    return make_error(
        ErrorCode::internal_node_eviction,
        name + " has " + std::to_string(n.child_count) + " child(ren); evicting it would disconnect their keys (0x08D)",
        "node");
  RadixEvictResult result;
  remove_leaf(ref->index, sink, result);
  return result;
}

}  // namespace kvrt
