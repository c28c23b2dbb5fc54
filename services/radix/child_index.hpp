#pragma once
// ChildIndex: the child selector of every radix node in one flat table
// (spec 0x08B: child = node.children[(extra key, first page)]).
//
// An entry maps hash(parent node, extra key, first page of the child's edge)
// to the child's node index. The hash only narrows the search: a lookup
// confirms every candidate against the child's real parent, extra key and
// first page (`confirm`), so two pages with colliding fingerprints are still
// told apart and a hit is exact. Open addressing with linear probing and
// backward-shift deletion keeps entries contiguous (no tombstones): a lookup
// is one or two cache lines, where a node-based map would chase a pointer
// per child.
#include <cstdint>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt {

class ChildIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  ChildIndex() { reset(16); }

  // The first child whose entry hash is `hash` and for which confirm(child)
  // holds, or kNone.
  template <class Confirm>
  uint32_t find(uint64_t hash, Confirm&& confirm) const {
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.child == kNone) return kNone;
      if (e.hash == hash && confirm(e.child)) return e.child;
    }
  }

  // Starts loading the probe run of `hash` (a later find/erase hits cache).
  void prefetch(uint64_t hash) const { __builtin_prefetch(&entries_[hash & mask_]); }

  void insert(uint64_t hash, uint32_t child);
  // Re-points the entry (hash, from) at `to` (a split puts the new shared
  // node where the old child was, 0x08B "replace the parent's selector").
  void replace(uint64_t hash, uint32_t from, uint32_t to);
  void erase(uint64_t hash, uint32_t child);
  void clear() { reset(16); }

  size_t size() const { return size_; }

  // Visits every (hash, child) entry; for validate().
  template <class F>
  void for_each(F&& f) const {
    for (const Entry& e : entries_)
      if (e.child != kNone) f(e.hash, e.child);
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t child = kNone;
  };
  size_t locate(uint64_t hash, uint32_t child) const;
  void reset(size_t capacity);
  void grow();

  std::vector<Entry> entries_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

// Mixes (parent node index, extra key, page fingerprint) into an entry hash.
inline uint64_t child_key_hash(uint32_t parent, uint64_t extra_key, uint64_t page_fingerprint) {
  auto mix = [](uint64_t a, uint64_t b) {
    const unsigned __int128 r = static_cast<unsigned __int128>(a ^ 0x9e3779b97f4a7c15ull) * (b ^ 0xd6e8feb86659fd93ull);
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  };
  return mix(mix(page_fingerprint, extra_key + 0x2545f4914f6cdd1dull), parent + 0x632be59bd9b4e019ull);
}

}  // namespace kvrt
