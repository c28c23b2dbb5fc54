// RadixTree core transitions: match with split (0x08B) and insert (0x08C),
// the node arena, the child selectors and the incremental digest. Locks are
// in radix_tree_locks.cpp, eviction in radix_tree_evict.cpp, path queries in
// radix_tree_paths.cpp, validate() in radix_tree_validate.cpp.
#include "services/radix/radix_tree.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace kvrt {

namespace {
// Domain tag of the node digest entries (first word, top byte).
constexpr uint64_t kNodeTag = uint64_t{0x52} << 56;  // 'R'

uint64_t fold(uint64_t a, uint64_t b) { return detail::mum(a ^ 0x8bb84b93962eacc9ull, b ^ 0x4b33a62ed433d4a3ull); }
}  // namespace

RadixTree::RadixTree(const RadixOptions& options) : options_(options) { reset(); }

Result<RadixTree> RadixTree::create(const RadixOptions& options) {
  KVRT_TRY(options.validate());
  return RadixTree(options);
}

void RadixTree::reset() {
  ++mutations_;
  nodes_.clear();
  edges_.clear();
  free_nodes_.clear();
  children_.clear();
  order_.clear();
  ledger_ = RadixLedger{};
  digest_ = MultisetDigest{};
  next_node_id_ = 1;
  RadixNode root;
  root.live = true;
  root.id = RadixNodeId{0};
  root.created = root.last_access = clock_;
  nodes_.push_back(std::move(root));
  order_.reserve_nodes(nodes_.size());
}

// ---------------------------------------------------------------------------
// Helpers

uint64_t RadixTree::page_fingerprint(const TokenId* page) const {
  // Page size 1: the token itself (exact). Larger pages: a 64-bit hash that
  // ChildIndex confirms against the stored page.
  if (options_.page_size == 1) return static_cast<uint64_t>(page[0]);
  return XXH3_64bits(page, size_t{options_.page_size} * sizeof(TokenId));
}

NodeIndex RadixTree::find_child(NodeIndex parent, uint64_t extra_key, const TokenId* page) const {
  const uint32_t p = options_.page_size;
  const uint32_t found = children_.find(selector_hash(parent, extra_key, page), [&](uint32_t c) {
    const RadixNode& n = nodes_[c];
    return n.parent == parent && n.extra_key == extra_key &&
           std::memcmp(n.edge.token_data(), page, size_t{p} * sizeof(TokenId)) == 0;
  });
  return found == ChildIndex::kNone ? kNoNode : found;
}

uint32_t RadixTree::common_prefix(const RadixNode& child, const TokenId* query, uint32_t query_len) const {
  const TokenId* edge = child.edge.token_data();
  const uint32_t limit = std::min(child.length(), query_len);
  uint32_t i = 0;
  // 16 tokens (64 bytes) per step: the XOR-OR of eight 64-bit lanes compiles
  // to SIMD compares with one branch, where a token-at-a-time loop with an
  // early exit is never vectorised. The match streams the edge from memory,
  // so this loop is the whole cost of a long hit.
  constexpr uint32_t kStep = 64 / sizeof(TokenId);
  while (i + kStep <= limit) {
    uint64_t diff = 0;
    for (uint32_t k = 0; k < 64; k += 8) {
      uint64_t a, b;
      std::memcpy(&a, reinterpret_cast<const char*>(edge + i) + k, 8);
      std::memcpy(&b, reinterpret_cast<const char*>(query + i) + k, 8);
      diff |= a ^ b;
    }
    if (diff != 0) break;
    i += kStep;
  }
  while (i < limit && edge[i] == query[i]) ++i;
  // A match only counts whole pages (0x08: boundaries are page aligned).
  return i - i % options_.page_size;
}

NodeIndex RadixTree::allocate_node() {
  if (!free_nodes_.empty()) return free_nodes_.take_lowest();
  KVRT_ASSERT(nodes_.size() < kNoNode, "node arena exhausted");
  nodes_.emplace_back();
  order_.reserve_nodes(nodes_.size());
  return static_cast<NodeIndex>(nodes_.size() - 1);
}

uint64_t RadixTree::boundary_fold_of(const EdgeSegment& e) {
  const uint32_t len = e.size();
  if (len == 0) return 0;
  return fold(fold(static_cast<uint64_t>(e.token_data()[0]), e.slot_data()[0].value),
              fold(static_cast<uint64_t>(e.token_data()[len - 1]), e.slot_data()[len - 1].value));
}

MultisetDigest::Entry RadixTree::node_entry(const RadixNode& n) const {
  // Every caller has just read or written the edge, so reading its first and
  // last entries here costs no cache miss; removal uses the cached image.
  const uint64_t structure = fold(fold(n.extra_key, n.created), boundary_fold_of(n.edge));
  const uint64_t recency = fold(fold(n.last_access, n.hits), static_cast<uint64_t>(n.priority));
  return {kNodeTag ^ n.id.value, nodes_[n.parent].id.value, (uint64_t{n.depth} << 32) | n.length(),
          fold(structure, recency)};
}

void RadixTree::refresh_image(NodeIndex i) {
  RadixNode& n = nodes_[i];
  digest_.remove_digest(n.image);
  n.image = MultisetDigest::image(node_entry(n));
  digest_.add_digest(n.image);
}

void RadixTree::stamp(NodeIndex i, uint64_t tick, bool count_hit) {
  RadixNode& n = nodes_[i];
  if (i == kRootIndex) {  // the root is never a candidate nor digested for recency
    n.last_access = tick;
    return;
  }
  n.last_access = tick;
  if (count_hit) ++n.hits;
  refresh_image(i);
  refresh_candidate(i);
}

void RadixTree::raise_priority(NodeIndex i, int64_t priority) {
  RadixNode& n = nodes_[i];
  if (priority <= n.priority) return;
  if (i == kRootIndex) {
    n.priority = priority;
    return;
  }
  n.priority = priority;
  refresh_image(i);
  refresh_candidate(i);
}

// ---------------------------------------------------------------------------
// Structural mutations

RadixSplit RadixTree::split(NodeIndex ci, uint32_t at) {
  const NodeIndex pi = allocate_node();  // may reallocate nodes_: take references after
  RadixNode& child = nodes_[ci];
  RadixNode& shared = nodes_[pi];
  const uint64_t old_selector = child.selector;

  shared.edge = child.edge.split_front(edges_, at);
  shared.parent = child.parent;
  shared.child_count = 1;
  // 0x08D: the shared prefix lies on every path that was protected through
  // the old node, so it inherits the full lock count.
  shared.lock_count = child.lock_count;
  shared.depth = child.depth;
  shared.extra_key = child.extra_key;
  shared.id = RadixNodeId{next_node_id_++};
  shared.created = shared.last_access = ++clock_;
  shared.hits = child.hits;
  shared.priority = child.priority;  // SGLang: the new node inherits the child's priority
  shared.live = true;
  child.parent = pi;
  child.depth += at;
  shared.first_page_fingerprint = child.first_page_fingerprint;
  child.first_page_fingerprint = page_fingerprint(child.edge.token_data());

  // The parent's selector for this first page now leads to the shared node;
  // the remainder is selected under the shared node by its new first page.
  shared.selector = old_selector;
  child.selector = selector_of(child);
  children_.replace(old_selector, ci, pi);
  children_.insert(child.selector, ci);
  // Leaf-ready tokens shrink when a candidate leaf hands `at` tokens to its
  // (internal, hence non-candidate) new parent; other ledgers are unchanged.
  if (order_.contains(ci)) ledger_.leaf_ready_tokens -= at;
  ++ledger_.nodes;

  refresh_image(ci);
  refresh_image(pi);  // a fresh node's image is zero: this only adds
  return RadixSplit{shared.id, child.id, at, child.depth};
}

NodeIndex RadixTree::add_leaf(NodeIndex parent, uint64_t extra_key, std::span<const TokenId> tokens,
                              std::span<const TokenSlotId> slots, int64_t priority) {
  const NodeIndex li = allocate_node();
  RadixNode& leaf = nodes_[li];
  RadixNode& p = nodes_[parent];
  leaf.edge = EdgeSegment(edges_, tokens, slots);
  leaf.parent = parent;
  leaf.child_count = 0;
  leaf.lock_count = 0;  // inserted tokens start unlocked
  leaf.depth = p.end_depth();
  leaf.extra_key = extra_key;
  leaf.id = RadixNodeId{next_node_id_++};
  leaf.created = leaf.last_access = ++clock_;
  leaf.hits = 0;
  leaf.priority = priority;
  leaf.live = true;
  leaf.first_page_fingerprint = page_fingerprint(tokens.data());
  leaf.selector = selector_of(leaf);
  children_.insert(leaf.selector, li);
  if (order_.contains(parent)) remove_candidate(parent);  // no longer a leaf
  ++p.child_count;
  ledger_.evictable_tokens += tokens.size();
  ledger_.total_tokens += tokens.size();
  ++ledger_.nodes;
  add_candidate(li);
  refresh_image(li);
  return li;
}

// ---------------------------------------------------------------------------
// Public operations

RadixMatchResult RadixTree::match(RadixKeyView key, std::vector<TokenSlotId>* slots_out) {
  ++mutations_;
  RadixMatchResult out;
  out.terminal = root();
  const uint32_t page = options_.page_size;
  const uint32_t len = static_cast<uint32_t>(key.tokens.size() - key.tokens.size() % page);
  if (len == 0) return out;  // SGLang returns before stamping anything

  const uint64_t tick = ++clock_;
  stamp(kRootIndex, tick, false);
  const TokenId* q = key.tokens.data();
  NodeIndex node = kRootIndex;
  uint32_t offset = 0;
  while (offset < len) {
    const NodeIndex child = find_child(node, key.extra_key, q + offset);
    if (child == kNoNode) break;
    stamp(child, tick, options_.count_hits);
    const uint32_t m = common_prefix(nodes_[child], q + offset, len - offset);
    KVRT_ASSERT(m >= page, "child selector matched a page the edge does not start with");
    if (m < nodes_[child].length()) {
      out.split = split(child, m);
      node = nodes_[child].parent;
      if (slots_out != nullptr) {
        const TokenSlotId* s = nodes_[node].edge.slot_data();
        slots_out->insert(slots_out->end(), s, s + m);
      }
      offset += m;
      break;
    }
    if (slots_out != nullptr) {
      const TokenSlotId* s = nodes_[child].edge.slot_data();
      slots_out->insert(slots_out->end(), s, s + m);
    }
    node = child;
    offset += m;
  }
  out.matched = offset;
  out.terminal = RadixNodeRef{node, nodes_[node].id};
  return out;
}

uint32_t RadixTree::peek(RadixKeyView key, std::vector<TokenSlotId>* slots_out) const {
  const uint32_t page = options_.page_size;
  const uint32_t len = static_cast<uint32_t>(key.tokens.size() - key.tokens.size() % page);
  const TokenId* q = key.tokens.data();
  NodeIndex node = kRootIndex;
  uint32_t offset = 0;
  while (offset < len) {
    const NodeIndex child = find_child(node, key.extra_key, q + offset);
    if (child == kNoNode) break;
    const uint32_t m = common_prefix(nodes_[child], q + offset, len - offset);
    KVRT_ASSERT(m >= page, "child selector matched a page the edge does not start with");
    // The edge's first m slots: what match() hands back from the upper half
    // of the split it would make here.
    if (slots_out != nullptr) {
      const TokenSlotId* s = nodes_[child].edge.slot_data();
      slots_out->insert(slots_out->end(), s, s + m);
    }
    offset += m;
    if (m < nodes_[child].length()) break;
    node = child;
  }
  return offset;
}

Result<RadixInsertResult> RadixTree::insert(RadixKeyView key, std::span<const TokenSlotId> slots, int64_t priority,
                                            RadixInsertUndo* undo) {
  if (slots.size() != key.tokens.size())
    return make_error(ErrorCode::invalid_argument,
                      "an edge owns equal token and slot segments (0x08A): " + std::to_string(key.tokens.size()) +
                          " tokens, " + std::to_string(slots.size()) + " slots",
                      "slots");
  if (key.tokens.size() > UINT32_MAX)
    return make_error(ErrorCode::invalid_argument, "sequence longer than 2^32 tokens", "tokens");
  ++mutations_;
  RadixInsertResult out;
  out.terminal = root();
  const uint32_t page = options_.page_size;
  const uint32_t len = static_cast<uint32_t>(key.tokens.size() - key.tokens.size() % page);
  out.stored_len = len;
  auto walked = [&](NodeIndex i) {
    if (undo != nullptr) undo->walked.push_back({i, nodes_[i].last_access, nodes_[i].priority});
  };
  if (undo != nullptr) *undo = RadixInsertUndo{0, clock_, next_node_id_, {}, {}, {}, {}};

  const uint64_t tick = ++clock_;
  walked(kRootIndex);
  stamp(kRootIndex, tick, false);
  raise_priority(kRootIndex, priority);
  if (len == 0) {
    if (undo != nullptr) undo->mutations = mutations_;
    return out;
  }

  const TokenId* q = key.tokens.data();
  NodeIndex node = kRootIndex;
  uint32_t offset = 0;
  while (offset < len) {
    const NodeIndex child = find_child(node, key.extra_key, q + offset);
    if (child == kNoNode) break;
    walked(child);
    stamp(child, tick, false);
    const uint32_t m = common_prefix(nodes_[child], q + offset, len - offset);
    KVRT_ASSERT(m >= page, "child selector matched a page the edge does not start with");
    offset += m;
    if (m < nodes_[child].length()) {
      out.split = split(child, m);
      node = nodes_[child].parent;
      if (undo != nullptr) {
        undo->split_shared = node;
        undo->split_child = child;
      }
      raise_priority(node, priority);
      break;  // the remainder's first page differs from the query's next page
    }
    raise_priority(child, priority);
    node = child;
  }
  out.prefix_len = offset;
  if (offset < len) {
    node = add_leaf(node, key.extra_key, key.tokens.subspan(offset, len - offset), slots.subspan(offset, len - offset),
                    priority);
    out.new_leaf = RadixNodeRef{node, nodes_[node].id};
    if (undo != nullptr) undo->leaf = out.new_leaf;
  }
  out.inserted = len - offset;
  out.terminal = RadixNodeRef{node, nodes_[node].id};
  if (undo != nullptr) undo->mutations = mutations_;
  return out;
}

}  // namespace kvrt
