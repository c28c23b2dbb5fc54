#include "services/radix/eviction_order.hpp"

namespace kvrt {

// Both sifts move a hole instead of swapping: each level copies one entry.
void EvictionOrder::sift_up(size_t i, Packed key, uint32_t node) {
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!(key < keys_[parent])) break;
    place(i, keys_[parent], nodes_[parent]);
    i = parent;
  }
  place(i, key, node);
}

void EvictionOrder::sift_down(size_t i, Packed key, uint32_t node) {
  const size_t n = keys_.size();
  for (;;) {
    const size_t first = i * kArity + 1;
    if (first >= n) break;
    size_t best = first;
    if (first + kArity <= n) {  // full family: unrolled least-of-four
      const size_t a = keys_[first + 1] < keys_[first] ? first + 1 : first;
      const size_t b = keys_[first + 3] < keys_[first + 2] ? first + 3 : first + 2;
      best = keys_[b] < keys_[a] ? b : a;
    } else {
      for (size_t c = first + 1; c < n; ++c)
        if (keys_[c] < keys_[best]) best = c;
    }
    if (!(keys_[best] < key)) break;
    place(i, keys_[best], nodes_[best]);
    i = best;
  }
  place(i, key, node);
}

void EvictionOrder::push(uint32_t node, EvictionKey key) {
  KVRT_ASSERT(node < pos_.size() && pos_[node] == kAbsent, "eviction candidate pushed twice");
  keys_.emplace_back();
  nodes_.emplace_back();
  sift_up(keys_.size() - 1, pack(key), node);
}

void EvictionOrder::erase(uint32_t node) {
  KVRT_ASSERT(contains(node), "erasing a node that is not an eviction candidate");
  const size_t i = pos_[node];
  pos_[node] = kAbsent;
  const Packed last_key = keys_.back();
  const uint32_t last_node = nodes_.back();
  keys_.pop_back();
  nodes_.pop_back();
  if (i == keys_.size()) return;
  // The moved entry may belong above or below the hole.
  if (i > 0 && last_key < keys_[(i - 1) / kArity])
    sift_up(i, last_key, last_node);
  else
    sift_down(i, last_key, last_node);
}

void EvictionOrder::update(uint32_t node, EvictionKey key) {
  KVRT_ASSERT(contains(node), "updating a node that is not an eviction candidate");
  const size_t i = pos_[node];
  const Packed old = keys_[i];
  const Packed now = pack(key);
  if (now < old)
    sift_up(i, now, node);
  else if (old < now)
    sift_down(i, now, node);
}

uint32_t EvictionOrder::pop() {
  KVRT_ASSERT(!nodes_.empty(), "pop from an empty eviction order");
  const uint32_t top = nodes_.front();
  pos_[top] = kAbsent;
  const Packed last_key = keys_.back();
  const uint32_t last_node = nodes_.back();
  keys_.pop_back();
  nodes_.pop_back();
  const size_t n = keys_.size();
  if (n == 0) return top;
  // Bottom-up (Floyd): walk the hole from the root to a leaf along the least
  // children without comparing against the moved entry, which almost always
  // belongs near the bottom, then sift that entry up the few levels it needs.
  size_t hole = 0;
  for (size_t first = 1; first < n; first = hole * kArity + 1) {
    size_t best = first;
    if (first + kArity <= n) {
      const size_t a = keys_[first + 1] < keys_[first] ? first + 1 : first;
      const size_t b = keys_[first + 3] < keys_[first + 2] ? first + 3 : first + 2;
      best = keys_[b] < keys_[a] ? b : a;
    } else {
      for (size_t c = first + 1; c < n; ++c)
        if (keys_[c] < keys_[best]) best = c;
    }
    place(hole, keys_[best], nodes_[best]);
    hole = best;
  }
  sift_up(hole, last_key, last_node);
  return top;
}

void EvictionOrder::clear() {
  keys_.clear();
  nodes_.clear();
  pos_.assign(pos_.size(), kAbsent);
}

bool EvictionOrder::consistent() const {
  size_t present = 0;
  for (uint32_t p : pos_)
    if (p != kAbsent) ++present;
  if (present != nodes_.size() || keys_.size() != nodes_.size()) return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] >= pos_.size() || pos_[nodes_[i]] != i) return false;
    if (i > 0 && keys_[i] < keys_[(i - 1) / kArity]) return false;
  }
  return true;
}

}  // namespace kvrt
