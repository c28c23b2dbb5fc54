#include "services/radix/child_index.hpp"

namespace kvrt {

void ChildIndex::reset(size_t capacity) {
  entries_.assign(capacity, Entry{});
  mask_ = capacity - 1;
  size_ = 0;
}

void ChildIndex::grow() {
  std::vector<Entry> old = std::move(entries_);
  reset(old.size() * 2);
  for (const Entry& e : old)
    if (e.child != kNone) insert(e.hash, e.child);
}

void ChildIndex::insert(uint64_t hash, uint32_t child) {
  KVRT_ASSERT(child != kNone, "kNone is not a node");
  // Load factor <= 1/2 keeps probe sequences short under linear probing.
  if ((size_ + 1) * 2 > entries_.size()) grow();
  uint64_t i = hash & mask_;
  while (entries_[i].child != kNone) i = (i + 1) & mask_;
  entries_[i] = Entry{hash, child};
  ++size_;
}

size_t ChildIndex::locate(uint64_t hash, uint32_t child) const {
  for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
    const Entry& e = entries_[i];
    KVRT_ASSERT(e.child != kNone, "child selector entry missing");
    if (e.hash == hash && e.child == child) return i;
  }
}

void ChildIndex::replace(uint64_t hash, uint32_t from, uint32_t to) { entries_[locate(hash, from)].child = to; }

void ChildIndex::erase(uint64_t hash, uint32_t child) {
  uint64_t hole = locate(hash, child);
  // Backward-shift deletion: pull later entries of the probe run into the
  // hole unless their home slot lies cyclically in (hole, j].
  for (uint64_t j = (hole + 1) & mask_; entries_[j].child != kNone; j = (j + 1) & mask_) {
    const uint64_t home = entries_[j].hash & mask_;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    entries_[hole] = entries_[j];
    hole = j;
  }
  entries_[hole] = Entry{};
  --size_;
}

}  // namespace kvrt
