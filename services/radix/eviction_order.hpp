#pragma once
// EvictionOrder: the victim order of spec 0x08E kept incrementally.
//
// The candidates are exactly the unlocked leaves. SGLang rebuilds a heap over
// all of them on every evict call (O(leaves) per call); here a candidate
// enters when it becomes an unlocked leaf, leaves when it is locked, gains a
// child or is deleted, and moves when its policy key changes (a match stamps
// it). Each change is O(log4 n) in an indexed 4-ary min-heap whose position
// table is indexed by node, so an evict call costs O(victims * log n).
//
// Keys are unique among candidates (every candidate carries a distinct
// logical tick in its minor key, see radix_tree.hpp), so the pop order is a
// total order and identical to a heap rebuilt from scratch.
//
// Layout: keys and node indices in separate arrays, a key packed into one
// 128-bit integer (major word high), so choosing the least of four children
// is three 128-bit compares over one 64-byte run of keys.
#include <algorithm>
#include <compare>
#include <cstdint>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt {

struct EvictionKey {
  uint64_t major = 0;  // policy segment: hits, priority or 0
  uint64_t minor = 0;  // logical tick, possibly complemented (mru, filo)
  friend auto operator<=>(const EvictionKey&, const EvictionKey&) = default;
};

class EvictionOrder {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  // Position table covers node indices < n (grows with the node arena).
  void reserve_nodes(size_t n) {
    if (pos_.size() < n) pos_.resize(n, kAbsent);
  }
  bool contains(uint32_t node) const { return node < pos_.size() && pos_[node] != kAbsent; }
  bool empty() const { return nodes_.empty(); }
  size_t size() const { return nodes_.size(); }
  uint32_t top() const { return nodes_.front(); }
  EvictionKey key_of(uint32_t node) const { return unpack(keys_[pos_[node]]); }

  void push(uint32_t node, EvictionKey key);
  void erase(uint32_t node);
  void update(uint32_t node, EvictionKey key);
  uint32_t pop();
  void clear();

  // Visits the candidates that become the top after the next pop (the
  // root's children), so a caller can prefetch them.
  template <class F>
  void for_each_runner_up(F&& f) const {
    const size_t end = std::min(nodes_.size(), kArity + 1);
    for (size_t i = 1; i < end; ++i) f(nodes_[i]);
  }
  // Visits (node, key) of every candidate; for validate().
  template <class F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < nodes_.size(); ++i) f(nodes_[i], unpack(keys_[i]));
  }
  // Heap property and position table agree (validate()).
  bool consistent() const;

 private:
  using Packed = unsigned __int128;
  static constexpr size_t kArity = 4;
  static Packed pack(EvictionKey k) { return (Packed{k.major} << 64) | k.minor; }
  static EvictionKey unpack(Packed p) { return {static_cast<uint64_t>(p >> 64), static_cast<uint64_t>(p)}; }
  void place(size_t i, Packed key, uint32_t node) {
    keys_[i] = key;
    nodes_[i] = node;
    pos_[node] = static_cast<uint32_t>(i);
  }
  void sift_up(size_t i, Packed key, uint32_t node);
  void sift_down(size_t i, Packed key, uint32_t node);

  std::vector<Packed> keys_;     // heap order
  std::vector<uint32_t> nodes_;  // heap order
  std::vector<uint32_t> pos_;    // node index -> heap position, kAbsent if not a candidate
};

}  // namespace kvrt
