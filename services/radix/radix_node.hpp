#pragma once
// One node of the radix tree (spec 0x08A) and the reference type that names
// it safely across node-arena reuse.
#include <cstdint>

#include "services/common/receipt_ids.hpp"
#include "services/common/state_digest.hpp"
#include "services/radix/edge_segment.hpp"

namespace kvrt {

// Position of a node in the tree's node arena. Indices are reused after a
// node is evicted; RadixNodeRef pairs one with the node's never-reused id.
using NodeIndex = uint32_t;
inline constexpr NodeIndex kRootIndex = 0;
inline constexpr NodeIndex kNoNode = UINT32_MAX;

// Two cache lines. The first holds everything a lock walk (0x08D) and the
// removal of an evicted leaf (0x08E) touch, so neither reads the second line
// nor the (cold) edge memory: links and counts, the edge view, the cached
// child-selector hash and the cached digest image of the node.
struct alignas(64) RadixNode {
  // --- line 1 ---
  NodeIndex parent = kNoNode;  // kNoNode for the root and for free arena slots
  // lock(v) of 0x08D: leases whose path root -> terminal contains v.
  uint32_t lock_count = 0;
  uint32_t child_count = 0;
  uint32_t depth = 0;     // tokens on the path above this edge [tokens]
  EdgeSegment edge;       // incoming compressed edge E_v (empty for the root)
  uint64_t selector = 0;  // child_key_hash(parent, extra_key, first page fingerprint)
  StateDigest image;      // MultisetDigest image of this node's digest entry
  // --- line 2 ---
  uint64_t extra_key = 0;  // namespace of the sequence (0x08 child selector); 0 = none
  // Logical clock (radix_tree.hpp): last walk and creation ticks.
  uint64_t last_access = 0;
  uint64_t created = 0;
  uint64_t hits = 0;                    // walks by a match (RadixOptions::count_hits)
  int64_t priority = 0;                 // max request priority inserted through it
  RadixNodeId id{};                     // root is 0; numbered 1, 2, ... per tree in creation order
  uint64_t first_page_fingerprint = 0;  // of the edge's first page
  bool live = false;

  uint32_t length() const { return edge.size(); }  // |X_v| = |S_v| [tokens]
  uint32_t end_depth() const { return depth + edge.size(); }
};
static_assert(sizeof(EdgeSegment) == 24 && sizeof(RadixNode) == 128, "RadixNode is two cache lines, line 1 hot");

// Names a node for a later call (a lock lease's terminal, a handle). The id
// is checked on use, so a reference to an evicted node whose index was reused
// is reported, never silently applied to the newcomer.
struct RadixNodeRef {
  NodeIndex index = kNoNode;
  RadixNodeId id{};
  bool is_root() const { return index == kRootIndex; }
  friend bool operator==(const RadixNodeRef&, const RadixNodeRef&) = default;
};

}  // namespace kvrt
