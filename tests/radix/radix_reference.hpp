#pragma once
// Brute-force reference of the radix index for the [radix] differential
// tests: a plain list of stored sequences with no tree, no compression and
// no incremental state. Every query is answered by scanning the list.
//
// It knows nothing of nodes, so eviction is checked against it structurally:
// an evicted edge must hold unlocked positions that no surviving sequence
// extends (a leaf), and the reference then forgets exactly those positions.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "services/radix/radix_tree.hpp"

namespace kvrt::radix_test {

class ReferenceIndex {
 public:
  explicit ReferenceIndex(uint32_t page_size) : page_(page_size) {}

  struct Seq {
    uint64_t extra = 0;
    std::vector<TokenId> tokens;
    std::vector<TokenSlotId> slots;
  };

  // Longest page-aligned common prefix with a stored sequence of the same
  // extra key, and that sequence's slots for it.
  std::pair<uint32_t, std::vector<TokenSlotId>> match(uint64_t extra, const std::vector<TokenId>& q) const {
    uint32_t best = 0;
    const Seq* from = nullptr;
    for (const Seq& s : seqs_) {
      if (s.extra != extra) continue;
      uint32_t i = 0;
      while (i < s.tokens.size() && i < q.size() && s.tokens[i] == q[i]) ++i;
      i -= i % page_;
      if (i > best) best = i, from = &s;
    }
    std::vector<TokenSlotId> slots;
    if (from != nullptr) slots.assign(from->slots.begin(), from->slots.begin() + best);
    return {best, slots};
  }

  // Returns prefix_len; stores the page-aligned sequence with the cached
  // prefix's slots followed by the new slots.
  uint32_t insert(uint64_t extra, const std::vector<TokenId>& tokens, const std::vector<TokenSlotId>& slots) {
    const uint32_t stored = static_cast<uint32_t>(tokens.size() - tokens.size() % page_);
    auto [prefix, cached] = match(extra, std::vector<TokenId>(tokens.begin(), tokens.begin() + stored));
    if (prefix < stored) {
      Seq s{extra, std::vector<TokenId>(tokens.begin(), tokens.begin() + stored), cached};
      s.slots.insert(s.slots.end(), slots.begin() + prefix, slots.begin() + stored);
      seqs_.push_back(std::move(s));
    }
    return prefix;
  }

  // Distinct cached token positions [tokens]. With pages, two sequences
  // share the slot of token k only if they share its whole page, so a
  // position is (extra, the prefix through the end of k's page, k).
  uint64_t total() const { return positions(seqs_).size(); }
  // Positions covered by a held lock path [tokens].
  uint64_t protected_tokens() const { return positions(locks_).size(); }

  void lock(uint64_t extra, std::vector<TokenId> path) { locks_.push_back(Seq{extra, std::move(path), {}}); }
  void unlock(uint64_t extra, const std::vector<TokenId>& path) {
    const auto it =
        std::find_if(locks_.begin(), locks_.end(), [&](const Seq& l) { return l.extra == extra && l.tokens == path; });
    if (it != locks_.end()) locks_.erase(it);
  }

  // Checks that the edge [depth, depth + tokens.size()) of path `prefix +
  // tokens` may be evicted (stored, unlocked, not extended by any sequence)
  // and forgets it. Returns false when the tree evicted something the
  // reference says it must not.
  bool evict_edge(uint64_t extra, const std::vector<TokenId>& full_path, uint32_t depth) {
    const std::set<Position> locked = positions(locks_);
    for (uint32_t k = depth + 1; k <= full_path.size(); ++k)
      if (locked.contains(position(extra, full_path, k))) return false;
    bool stored = false;
    for (const Seq& s : seqs_) {
      if (s.extra != extra || s.tokens.size() < full_path.size() ||
          !std::equal(full_path.begin(), full_path.end(), s.tokens.begin()))
        continue;
      if (s.tokens.size() > full_path.size()) return false;  // not a leaf
      stored = true;
    }
    if (!stored) return false;
    for (Seq& s : seqs_)
      if (s.extra == extra && s.tokens.size() == full_path.size() &&
          std::equal(full_path.begin(), full_path.end(), s.tokens.begin())) {
        s.tokens.resize(depth);
        s.slots.resize(depth);
      }
    std::erase_if(seqs_, [](const Seq& s) { return s.tokens.empty(); });
    return true;
  }

  void clear() {
    seqs_.clear();
    locks_.clear();
  }

 private:
  using Position = std::tuple<uint64_t, std::vector<TokenId>, size_t>;
  // Stored and locked sequences are page aligned, so the page end exists.
  Position position(uint64_t extra, const std::vector<TokenId>& tokens, size_t k) const {
    const size_t page_end = (k + page_ - 1) / page_ * page_;
    return Position{extra, std::vector<TokenId>(tokens.begin(), tokens.begin() + page_end), k};
  }
  std::set<Position> positions(const std::vector<Seq>& list) const {
    std::set<Position> out;
    for (const Seq& s : list)
      for (size_t k = 1; k <= s.tokens.size(); ++k) out.insert(position(s.extra, s.tokens, k));
    return out;
  }

  uint32_t page_;
  std::vector<Seq> seqs_;
  std::vector<Seq> locks_;
};

// SGLang's eviction algorithm (0x08E evict_tokens) replayed from scratch on a
// snapshot of the tree: rank all unlocked leaves, pop, push exposed parents.
// The incrementally maintained order must produce the same victims.
inline std::vector<RadixNodeId> rebuilt_heap_victims(const RadixTree& tree, uint64_t target) {
  struct Snap {
    RadixNodeId parent;
    uint32_t children = 0, locks = 0, length = 0;
    EvictionKey key;
  };
  std::map<uint64_t, Snap> nodes;
  tree.for_each_node([&](RadixNodeRef ref, const RadixNode& n) {
    nodes[ref.id.value] = Snap{tree.parent_of(ref).id, n.child_count, n.lock_count, n.length(), tree.eviction_key(n)};
  });
  std::set<std::pair<EvictionKey, uint64_t>> heap;
  for (const auto& [id, s] : nodes)
    if (s.children == 0 && s.locks == 0) heap.emplace(s.key, id);
  std::vector<RadixNodeId> victims;
  uint64_t released = 0;
  while (released < target && !heap.empty()) {
    const auto [key, id] = *heap.begin();
    heap.erase(heap.begin());
    victims.push_back(RadixNodeId{id});
    released += nodes[id].length;
    const uint64_t parent = nodes[id].parent.value;
    if (parent != 0 && --nodes[parent].children == 0 && nodes[parent].locks == 0)
      heap.emplace(nodes[parent].key, parent);
  }
  return victims;
}

}  // namespace kvrt::radix_test
