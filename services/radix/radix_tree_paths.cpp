// RadixTree read access: node references, lookups by id and the complete
// key and slot path X(u), S(u) of spec 0x08A.
#include <algorithm>

#include "services/radix/radix_tree.hpp"

namespace kvrt {

bool RadixTree::is_live(RadixNodeRef ref) const {
  return ref.index < nodes_.size() && nodes_[ref.index].live && nodes_[ref.index].id == ref.id;
}

const RadixNode& RadixTree::node(RadixNodeRef ref) const {
  KVRT_ASSERT(is_live(ref), "node reference is stale");
  return nodes_[ref.index];
}

std::optional<RadixNodeRef> RadixTree::find(RadixNodeId id) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].live && nodes_[i].id == id) return RadixNodeRef{static_cast<NodeIndex>(i), id};
  return std::nullopt;
}

RadixNodeRef RadixTree::parent_of(RadixNodeRef ref) const {
  const RadixNode& n = node(ref);
  if (n.parent == kNoNode) return ref;
  return RadixNodeRef{n.parent, nodes_[n.parent].id};
}

std::vector<RadixNodeId> RadixTree::path_ids(RadixNodeRef terminal) const {
  (void)node(terminal);  // asserts the reference is live
  std::vector<RadixNodeId> ids;
  for (NodeIndex i = terminal.index; i != kRootIndex; i = nodes_[i].parent) ids.push_back(nodes_[i].id);
  std::reverse(ids.begin(), ids.end());
  return ids;
}

std::vector<TokenId> RadixTree::path_tokens(RadixNodeRef terminal) const {
  std::vector<TokenId> out(node(terminal).end_depth());
  for (NodeIndex i = terminal.index; i != kRootIndex; i = nodes_[i].parent)
    std::copy(nodes_[i].edge.tokens().begin(), nodes_[i].edge.tokens().end(), out.begin() + nodes_[i].depth);
  return out;
}

std::vector<TokenSlotId> RadixTree::path_slots(RadixNodeRef terminal) const {
  std::vector<TokenSlotId> out(node(terminal).end_depth());
  for (NodeIndex i = terminal.index; i != kRootIndex; i = nodes_[i].parent)
    std::copy(nodes_[i].edge.slots().begin(), nodes_[i].edge.slots().end(), out.begin() + nodes_[i].depth);
  return out;
}

}  // namespace kvrt
