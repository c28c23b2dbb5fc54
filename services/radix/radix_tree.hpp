#pragma once
// RadixTree: the compressed prefix tree of spec 0x08 over (token id, K/V slot)
// segments, with SGLang RadixCache semantics (v0.5.11) as its observable
// behaviour and kvrt's exactness checks around it.
//
// What it owns: the edges (0x08A), child selectors keyed by (extra key, first
// page), path lock counts (0x08D), the logical clock and the incrementally
// maintained eviction order (0x08E), the token ledgers and a state digest.
// What it does not own: slot allocation. Inserted duplicate slots and evicted
// slots are reported to the caller (insert result, eviction sink), who returns
// them to the pool (docs/conventions.md: the index never frees into the allocator).
//
// Logical clock. Every match or insert takes one fresh tick t and writes it to
// every node it walks (root included); a node created during the op (the new
// parent of a split, the new leaf of an insert, in that order) gets a later
// fresh tick as both its creation and access time; the remainder of a split
// keeps t. Lock, unlock and eviction stamp nothing. Consequence used by the
// eviction order: a tick is shared only by nodes of one root path, so no two
// leaves ever carry the same access tick and every policy key is unique.
//
// Conservation laws (validate() re-derives each from scratch):
//   evictable + protected = total               [tokens]   (0x08D)
//   leaf_ready = sum |X_v| over unlocked leaves <= evictable
//   lock(v) = leases terminating at v + sum over children lock(c) >= lock(c)
//   every edge: |X_v| = |S_v| > 0, |X_v| % page_size = 0, depth(v) = end_depth(parent)
//   candidates of the eviction order = unlocked leaves, keys current
//   every slot id appears on at most one edge
#include <optional>
#include <span>
#include <vector>

#include "services/common/result.hpp"
#include "services/common/state_digest.hpp"
#include "services/radix/child_index.hpp"
#include "services/radix/edge_store.hpp"
#include "services/radix/eviction_order.hpp"
#include "services/radix/free_node_indices.hpp"
#include "services/radix/radix_node.hpp"
#include "services/radix/radix_options.hpp"

namespace kvrt {

// A lookup or insertion key: tokens in one namespace. Sequences with
// different extra keys never share a node below the root (0x08, SGLang
// RadixKey.extra_key: LoRA id, cache salt, ...).
struct RadixKeyView {
  std::span<const TokenId> tokens;
  uint64_t extra_key = 0;  // 0 = no extra key
};

// A split of 0x08B: the old node keeps its identity and becomes the lower
// half (so a lock taken on it still unlocks through the new parent).
struct RadixSplit {
  RadixNodeId shared;     // new parent holding X[0:at], S[0:at]
  RadixNodeId remainder;  // the old node, now holding X[at:], S[at:]
  uint32_t at = 0;        // split point inside the old edge [tokens]
  uint32_t depth = 0;     // path position of the split point [tokens]
  friend bool operator==(const RadixSplit&, const RadixSplit&) = default;
};

struct RadixMatchResult {
  uint32_t matched = 0;             // [tokens], page aligned
  RadixNodeRef terminal;            // node ending at `matched` (root when 0)
  std::optional<RadixSplit> split;  // at most one per match (0x08B)
};

struct RadixInsertResult {
  uint32_t stored_len = 0;  // page-aligned part of the key considered [tokens]
  uint32_t prefix_len = 0;  // tokens already cached: their input slots are duplicates [tokens]
  uint32_t inserted = 0;    // stored_len - prefix_len, now owned by the tree [tokens]
  RadixNodeRef terminal;    // node ending at stored_len (root when 0)
  std::optional<RadixNodeRef> new_leaf;
  std::optional<RadixSplit> split;
};

// What one insert() changed, so that a withdrawn insertion (an adoption the
// allocator refused, or a fault point after it, 0x04F) can be taken back
// node for node: RadixTree::undo_insert.
struct RadixInsertUndo {
  uint64_t mutations = 0;  // the tree's mutation count right after the insert
  uint64_t clock = 0;      // before the insert
  uint64_t next_node_id = 1;
  struct Walked {
    uint32_t index = 0;  // NodeIndex of a node the insert stamped or raised
    uint64_t last_access = 0;
    int64_t priority = 0;
  };
  std::vector<Walked> walked;  // before the insert, in walk order (root first)
  // A split the insert made: the new shared node and the node it split,
  // which kept its id and took the remainder of the edge.
  std::optional<uint32_t> split_shared, split_child;
  std::optional<RadixNodeRef> leaf;  // the leaf it added
};

// One evicted edge as the eviction sink sees it, before its memory is reused.
struct RadixEvictedEdge {
  RadixNodeId node;
  RadixNodeId parent;
  uint32_t depth = 0;  // [tokens]
  uint64_t extra_key = 0;
  std::span<const TokenId> tokens;
  std::span<const TokenSlotId> slots;  // to be returned to the pool by the caller
};

class RadixEvictionSink {
 public:
  virtual ~RadixEvictionSink() = default;
  virtual void evicted(const RadixEvictedEdge& edge) = 0;
  // Asked by evict() before each victim leaves the tree: true ends the
  // eviction there (a fault-injection run). The victims removed so far stay
  // removed, each a complete step; the candidates left keep their order, so
  // the tree is the one a smaller eviction of the same victims leaves.
  virtual bool interrupted() { return false; }
};

struct RadixEvictResult {
  uint64_t evicted_tokens = 0;  // may exceed the target: whole edges only [tokens]
  uint32_t evicted_nodes = 0;
};

// Token ledgers of 0x08D [tokens], plus the node count (root excluded).
struct RadixLedger {
  uint64_t evictable_tokens = 0;   // in nodes with lock(v) = 0
  uint64_t protected_tokens = 0;   // in nodes with lock(v) > 0
  uint64_t leaf_ready_tokens = 0;  // in unlocked leaves (reclaimable right now)
  uint64_t total_tokens = 0;       // = tree-owned slots (one per token)
  uint32_t nodes = 0;
  friend bool operator==(const RadixLedger&, const RadixLedger&) = default;
};

class RadixTree {
 public:
  static Result<RadixTree> create(const RadixOptions& options);

  const RadixOptions& options() const { return options_; }

  // Longest cached page-aligned prefix of `key` (0x08B). Stamps the walked
  // path, counts hits when enabled, and splits the last edge when the match
  // ends inside it. Appends the matched slots to `slots_out` when given.
  RadixMatchResult match(RadixKeyView key, std::vector<TokenSlotId>* slots_out = nullptr);
  // What match() would answer for `key` now, changing nothing: no stamp, no
  // hit count, no split. Answers the matched length and appends the matched
  // slots (the same slots match() would); a hit ending inside an edge has no
  // node ending at it, so there is no terminal.
  uint32_t peek(RadixKeyView key, std::vector<TokenSlotId>* slots_out = nullptr) const;

  // Inserts key[0:stored_len] with its slots (0x08C). Only the uncached
  // suffix is stored; the caller releases slots[0:prefix_len] (duplicates)
  // and slots[stored_len:] (unaligned tail). `priority` raises the priority
  // of every walked node to at least this value.
  // With `undo`, also records what the insert changed.
  Result<RadixInsertResult> insert(RadixKeyView key, std::span<const TokenSlotId> slots, int64_t priority = 0,
                                   RadixInsertUndo* undo = nullptr);
  // Takes back the insert `undo` recorded, when nothing has changed the tree
  // since (no match, insert, lock or eviction): its leaf leaves (its slots to
  // `sink`), a split edge is joined again, the walked nodes get their stamps
  // and priorities back, and the clock and the id counter theirs, so the tree
  // is the one that never saw the insert: same digest, same eviction order.
  // False, and nothing done, when the tree changed since.
  bool undo_insert(const RadixInsertUndo& undo, RadixEvictionSink* sink = nullptr);

  // Lock references along the whole path terminal -> root (0x08D). Returns
  // the change of evictable tokens: <= 0 for inc_lock, >= 0 for dec_lock.
  // Locking the root is a no-op (an empty match locks nothing).
  Result<int64_t> inc_lock(RadixNodeRef terminal);
  Result<int64_t> dec_lock(RadixNodeRef terminal);

  // Evicts unlocked leaves in policy order, whole edges, until at least
  // `target_tokens` are released or no candidate is left; a parent that
  // becomes an unlocked leaf is a candidate within the same call (0x08E).
  RadixEvictResult evict(uint64_t target_tokens, RadixEvictionSink* sink = nullptr);
  // Evicts one named leaf (namespace purge, failure lab 0x08I). Rejects the
  // root, an unknown id, a locked node and an internal node; O(nodes) lookup.
  Result<RadixEvictResult> evict_leaf(RadixNodeId node, RadixEvictionSink* sink = nullptr);

  // Evicts every unlocked node keyed by `extra_key`, leaf first, parents as
  // they become unlocked leaves (a namespace generation that nothing can
  // match again, 0x01A). Locked paths stay until their locks end; they are
  // then ordinary candidates of evict(). O(nodes).
  RadixEvictResult evict_extra_key(uint64_t extra_key, RadixEvictionSink* sink = nullptr);
  // Live nodes keyed by `extra_key` (what evict_extra_key left: locked paths). O(nodes).
  size_t count_extra_key(uint64_t extra_key) const;

  // Drops every node (SGLang reset); the node id counter restarts at 1.
  void reset();

  const RadixLedger& ledger() const { return ledger_; }
  // Incremental digest: one entry per node, binding its structure (id,
  // parent, depth, length, extra key, boundary tokens and slots) and recency
  // (ticks, hits, priority). Lock counts are not part of it: they are derived
  // state, re-derived from leases by the owner (0x08D).
  StateDigest state_digest() const { return digest_.value(); }
  uint64_t clock() const { return clock_; }

  // Read access for owners, receipts and tests.
  bool is_live(RadixNodeRef ref) const;
  const RadixNode& node(RadixNodeRef ref) const;           // asserts is_live
  std::optional<RadixNodeRef> find(RadixNodeId id) const;  // O(nodes)
  RadixNodeRef root() const { return RadixNodeRef{kRootIndex, RadixNodeId{0}}; }
  RadixNodeRef parent_of(RadixNodeRef ref) const;
  // Non-root node ids root -> terminal, and the concatenated X(u), S(u).
  std::vector<RadixNodeId> path_ids(RadixNodeRef terminal) const;
  std::vector<TokenId> path_tokens(RadixNodeRef terminal) const;
  std::vector<TokenSlotId> path_slots(RadixNodeRef terminal) const;
  EvictionKey eviction_key(const RadixNode& node) const;
  bool is_eviction_candidate(RadixNodeRef ref) const { return order_.contains(ref.index); }
  template <class F>
  void for_each_node(F&& f) const {  // live non-root nodes, arena order
    for (size_t i = 1; i < nodes_.size(); ++i)
      if (nodes_[i].live) f(RadixNodeRef{static_cast<NodeIndex>(i), nodes_[i].id}, nodes_[i]);
  }

  // Re-derives every conservation law above from scratch.
  Status validate() const;

 private:
  explicit RadixTree(const RadixOptions& options);

  uint64_t page_fingerprint(const TokenId* page) const;
  uint64_t selector_hash(NodeIndex parent, uint64_t extra_key, const TokenId* first_page) const {
    return child_key_hash(parent, extra_key, page_fingerprint(first_page));
  }
  // The selector entry of a non-root node, from its cached fingerprint.
  static uint64_t selector_of(const RadixNode& n) {
    return child_key_hash(n.parent, n.extra_key, n.first_page_fingerprint);
  }
  NodeIndex find_child(NodeIndex parent, uint64_t extra_key, const TokenId* page) const;
  uint32_t common_prefix(const RadixNode& child, const TokenId* query, uint32_t query_len) const;
  NodeIndex allocate_node();
  void stamp(NodeIndex i, uint64_t tick, bool count_hit);
  void raise_priority(NodeIndex i, int64_t priority);
  RadixSplit split(NodeIndex child, uint32_t at);
  NodeIndex add_leaf(NodeIndex parent, uint64_t extra_key, std::span<const TokenId> tokens,
                     std::span<const TokenSlotId> slots, int64_t priority);
  void remove_leaf(NodeIndex i, RadixEvictionSink* sink, RadixEvictResult& result);
  void add_candidate(NodeIndex i);
  void remove_candidate(NodeIndex i);
  void refresh_candidate(NodeIndex i);
  static uint64_t boundary_fold_of(const EdgeSegment& edge);
  // The digest entry of a non-root node: structure (id, parent, depth,
  // length, extra key, creation, boundary tokens and slots) and recency
  // (last access, hits, priority).
  MultisetDigest::Entry node_entry(const RadixNode& n) const;
  // Replaces node i's cached image (and its share of the digest) after a
  // change of any field node_entry reads.
  void refresh_image(NodeIndex i);

  RadixOptions options_;
  EdgeStore edges_;               // memory of every edge; declared before nodes_, whose views point into it
  std::vector<RadixNode> nodes_;  // arena; index 0 is the root
  FreeNodeIndices free_nodes_;    // lowest index first (free_node_indices.hpp)
  ChildIndex children_;
  EvictionOrder order_;
  static constexpr uint32_t kEvictLookahead = 4;  // victims whose node lines evict() requests ahead of their pop
  RadixLedger ledger_;
  MultisetDigest digest_;
  uint64_t clock_ = 0;  // last tick handed out
  uint64_t next_node_id_ = 1;
  uint64_t mutations_ = 0;  // public operations that may change the tree: undo_insert's guard
};

}  // namespace kvrt
