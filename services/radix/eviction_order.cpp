#include "services/radix/eviction_order.hpp"

namespace kvrt {

void EvictionOrder::reserve_nodes(size_t n) {
  if (place_.size() < n) {
    place_.resize(n, kAbsent);
    links_.resize(n);
  }
}

EvictionKey EvictionOrder::key_of(uint32_t node) const {
  KVRT_ASSERT(contains(node), "key of a node that is not an eviction candidate");
  return place_[node] == kInRun ? unpack(links_[node].key) : unpack(heap_keys_[place_[node]]);
}

void EvictionOrder::push(uint32_t node, EvictionKey key) {
  KVRT_ASSERT(node < place_.size() && place_[node] == kAbsent, "eviction candidate pushed twice");
  const Packed packed = pack(key);
  if (!try_run_push(node, packed)) heap_push(node, packed);
}

void EvictionOrder::erase(uint32_t node) {
  KVRT_ASSERT(contains(node), "erasing a node that is not an eviction candidate");
  if (place_[node] == kInRun)
    run_unlink(node);
  else
    heap_erase(node);
}

void EvictionOrder::update(uint32_t node, EvictionKey key) {
  KVRT_ASSERT(contains(node), "updating a node that is not an eviction candidate");
  const Packed now = pack(key);
  if (place_[node] == kInRun) {
    // A restamp under LRU moves the node to the tail: unlink, then re-enter.
    run_unlink(node);
    if (!try_run_push(node, now)) heap_push(node, now);
    return;
  }
  // Leave the heap for the run when the new key extends it (the next pops
  // then see it O(1)); otherwise move it within the heap.
  if ((run_size_ == 0 || now > links_[run_tail_].key || now < links_[run_head_].key)) {
    heap_erase(node);
    const bool entered = try_run_push(node, now);
    KVRT_ASSERT(entered, "a key beyond the run's ends enters the run");
    return;
  }
  const size_t i = place_[node];
  const Packed old = heap_keys_[i];
  if (now < old)
    sift_up(i, now, node);
  else if (old < now)
    sift_down(i, now, node);
}

uint32_t EvictionOrder::pop() {
  KVRT_ASSERT(!empty(), "pop from an empty eviction order");
  if (!run_holds_top()) return heap_pop();
  const uint32_t top = run_head_;
  run_unlink(top);
  return top;
}

void EvictionOrder::clear() {
  run_head_ = run_tail_ = kNone;
  run_size_ = 0;
  heap_keys_.clear();
  heap_nodes_.clear();
  place_.assign(place_.size(), kAbsent);
}

bool EvictionOrder::try_run_push(uint32_t node, Packed key) {
  RunLink& link = links_[node];
  if (run_size_ == 0) {
    link = RunLink{key, kNone, kNone};
    run_head_ = run_tail_ = node;
  } else if (key > links_[run_tail_].key) {
    link = RunLink{key, run_tail_, kNone};
    links_[run_tail_].next = node;
    run_tail_ = node;
  } else if (key < links_[run_head_].key) {
    link = RunLink{key, kNone, run_head_};
    links_[run_head_].prev = node;
    run_head_ = node;
  } else {
    return false;
  }
  place_[node] = kInRun;
  ++run_size_;
  return true;
}

void EvictionOrder::run_unlink(uint32_t node) {
  const RunLink& link = links_[node];
  if (link.prev != kNone)
    links_[link.prev].next = link.next;
  else
    run_head_ = link.next;
  if (link.next != kNone)
    links_[link.next].prev = link.prev;
  else
    run_tail_ = link.prev;
  place_[node] = kAbsent;
  --run_size_;
}

void EvictionOrder::heap_push(uint32_t node, Packed key) {
  heap_keys_.emplace_back();
  heap_nodes_.emplace_back();
  sift_up(heap_keys_.size() - 1, key, node);
}

void EvictionOrder::heap_erase(uint32_t node) {
  const size_t i = place_[node];
  place_[node] = kAbsent;
  const Packed last_key = heap_keys_.back();
  const uint32_t last_node = heap_nodes_.back();
  heap_keys_.pop_back();
  heap_nodes_.pop_back();
  if (i == heap_keys_.size()) return;
  // The moved entry may belong above or below the hole.
  if (i > 0 && last_key < heap_keys_[(i - 1) / kArity])
    sift_up(i, last_key, last_node);
  else
    sift_down(i, last_key, last_node);
}

uint32_t EvictionOrder::heap_pop() {
  const uint32_t top = heap_nodes_.front();
  place_[top] = kAbsent;
  const Packed last_key = heap_keys_.back();
  const uint32_t last_node = heap_nodes_.back();
  heap_keys_.pop_back();
  heap_nodes_.pop_back();
  const size_t n = heap_keys_.size();
  if (n == 0) return top;
  // Bottom-up (Floyd): walk the hole from the root to a leaf along the least
  // children without comparing against the moved entry, which almost always
  // belongs near the bottom, then sift that entry up the few levels it needs.
  size_t hole = 0;
  for (size_t first = 1; first < n; first = hole * kArity + 1) {
    const size_t best = least_child(first, n);
    heap_place(hole, heap_keys_[best], heap_nodes_[best]);
    hole = best;
  }
  sift_up(hole, last_key, last_node);
  return top;
}

size_t EvictionOrder::least_child(size_t first, size_t n) const {
  if (first + kArity <= n) {  // full family: unrolled least-of-four
    const size_t a = heap_keys_[first + 1] < heap_keys_[first] ? first + 1 : first;
    const size_t b = heap_keys_[first + 3] < heap_keys_[first + 2] ? first + 3 : first + 2;
    return heap_keys_[b] < heap_keys_[a] ? b : a;
  }
  size_t best = first;
  for (size_t c = first + 1; c < n; ++c)
    if (heap_keys_[c] < heap_keys_[best]) best = c;
  return best;
}

// Both sifts move a hole instead of swapping: each level copies one entry.
void EvictionOrder::sift_up(size_t i, Packed key, uint32_t node) {
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!(key < heap_keys_[parent])) break;
    heap_place(i, heap_keys_[parent], heap_nodes_[parent]);
    i = parent;
  }
  heap_place(i, key, node);
}

void EvictionOrder::sift_down(size_t i, Packed key, uint32_t node) {
  const size_t n = heap_keys_.size();
  for (;;) {
    const size_t first = i * kArity + 1;
    if (first >= n) break;
    const size_t best = least_child(first, n);
    if (!(heap_keys_[best] < key)) break;
    heap_place(i, heap_keys_[best], heap_nodes_[best]);
    i = best;
  }
  heap_place(i, key, node);
}

bool EvictionOrder::consistent() const {
  size_t in_run = 0, in_heap = 0;
  for (uint32_t p : place_) {
    if (p == kInRun)
      ++in_run;
    else if (p != kAbsent)
      ++in_heap;
  }
  if (in_run != run_size_ || in_heap != heap_nodes_.size() || heap_keys_.size() != heap_nodes_.size()) return false;
  // The run: linked both ways from head to tail, strictly ascending keys.
  size_t walked = 0;
  uint32_t prev = kNone;
  for (uint32_t at = run_head_; at != kNone; prev = at, at = links_[at].next) {
    if (at >= place_.size() || place_[at] != kInRun || links_[at].prev != prev) return false;
    if (prev != kNone && !(links_[prev].key < links_[at].key)) return false;
    if (++walked > run_size_) return false;
  }
  if (walked != run_size_ || run_tail_ != prev) return false;
  for (size_t i = 0; i < heap_nodes_.size(); ++i) {
    if (heap_nodes_[i] >= place_.size() || place_[heap_nodes_[i]] != i) return false;
    if (i > 0 && heap_keys_[i] < heap_keys_[(i - 1) / kArity]) return false;
  }
  return true;
}

}  // namespace kvrt
