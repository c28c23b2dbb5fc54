#pragma once
// EvictionOrder: the victim order of spec 0x08E kept incrementally.
//
// The candidates are exactly the unlocked leaves. SGLang rebuilds a heap over
// all of them on every evict call (O(leaves) per call); here a candidate
// enters when it becomes an unlocked leaf, leaves when it is locked, gains a
// child or is deleted, and moves when its policy key changes (a match stamps
// it).
//
// Two sorted structures hold the candidates, and the victim is the lesser of
// their two minima:
//   - the run: a doubly linked list of candidates in ascending key order that
//     only ever grows at its ends. Under LRU and FIFO a new leaf and a
//     restamped one carry the newest tick (radix_tree.hpp "Logical clock"),
//     so they append; under MRU and FILO the complemented tick is the
//     smallest, so they prepend. Entering, leaving and popping cost O(1),
//     and the next victims are known several pops ahead, which lets
//     RadixTree::evict start loading their nodes early.
//   - a 4-ary min-heap (indexed: a position table per node) for every key
//     that fits at neither end of the run: a parent exposed by an eviction,
//     a leaf whose last lock was released, LFU and priority keys. O(log4 n).
// Keys are unique among candidates (every candidate carries a distinct
// logical tick in its minor key), so the pop order is a total order and
// identical to one sorted set of all candidates; the property test in
// tests/radix_tree_test.cpp compares it with exactly that.
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
  // Position table covers node indices < n (grows with the node arena).
  void reserve_nodes(size_t n);
  bool contains(uint32_t node) const { return node < place_.size() && place_[node] != kAbsent; }
  bool empty() const { return run_size_ == 0 && heap_nodes_.empty(); }
  size_t size() const { return run_size_ + heap_nodes_.size(); }
  uint32_t top() const { return run_holds_top() ? run_head_ : heap_nodes_.front(); }
  EvictionKey key_of(uint32_t node) const;

  void push(uint32_t node, EvictionKey key);
  void erase(uint32_t node);
  void update(uint32_t node, EvictionKey key);
  uint32_t pop();
  void clear();

  // Visits candidates likely to be popped soon after the top (the next
  // `run_ahead` run entries and the heap root's children), so a caller can
  // start loading their data. Order is unspecified; the visit reads only
  // this object's arrays.
  template <class F>
  void for_each_upcoming(uint32_t run_ahead, F&& f) const {
    uint32_t at = run_head_;
    for (uint32_t k = 0; k <= run_ahead && at != kNone; ++k, at = links_[at].next)
      if (k > 0) f(at);
    const size_t end = std::min(heap_nodes_.size(), kArity + 1);
    for (size_t i = 1; i < end; ++i) f(heap_nodes_[i]);
  }
  // Visits (node, key) of every candidate; for validate().
  template <class F>
  void for_each(F&& f) const {
    for (uint32_t at = run_head_; at != kNone; at = links_[at].next) f(at, unpack(links_[at].key));
    for (size_t i = 0; i < heap_nodes_.size(); ++i) f(heap_nodes_[i], unpack(heap_keys_[i]));
  }
  // Run sorted and linked both ways, heap property, position table agrees
  // with both (validate()).
  bool consistent() const;

  // Where the candidates sit; for tests and the bench note.
  size_t run_size() const { return run_size_; }
  size_t heap_size() const { return heap_nodes_.size(); }

 private:
  using Packed = unsigned __int128;
  static constexpr size_t kArity = 4;
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kAbsent = UINT32_MAX;     // place_: not a candidate
  static constexpr uint32_t kInRun = UINT32_MAX - 1;  // place_: in the run
  static Packed pack(EvictionKey k) { return (Packed{k.major} << 64) | k.minor; }
  static EvictionKey unpack(Packed p) { return {static_cast<uint64_t>(p >> 64), static_cast<uint64_t>(p)}; }

  struct RunLink {
    Packed key = 0;
    uint32_t prev = kNone;
    uint32_t next = kNone;
  };

  bool run_holds_top() const {
    if (run_size_ == 0) return false;
    return heap_nodes_.empty() || links_[run_head_].key < heap_keys_.front();
  }
  // Adds to the run when the key extends one of its ends; false otherwise.
  bool try_run_push(uint32_t node, Packed key);
  void run_unlink(uint32_t node);
  void heap_push(uint32_t node, Packed key);
  void heap_erase(uint32_t node);
  uint32_t heap_pop();
  void heap_place(size_t i, Packed key, uint32_t node) {
    heap_keys_[i] = key;
    heap_nodes_[i] = node;
    place_[node] = static_cast<uint32_t>(i);
  }
  // The least of the children [first, min(first + kArity, n)) of one family.
  size_t least_child(size_t first, size_t n) const;
  void sift_up(size_t i, Packed key, uint32_t node);
  void sift_down(size_t i, Packed key, uint32_t node);

  std::vector<uint32_t> place_;  // node -> heap position, kInRun or kAbsent
  std::vector<RunLink> links_;   // node -> run key and neighbours (valid while kInRun)
  uint32_t run_head_ = kNone;    // least key of the run
  uint32_t run_tail_ = kNone;    // greatest key of the run
  size_t run_size_ = 0;
  std::vector<Packed> heap_keys_;     // heap order
  std::vector<uint32_t> heap_nodes_;  // heap order
};

}  // namespace kvrt
