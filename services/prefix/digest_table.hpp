#pragma once
// DigestTable: BlockHash -> what a lookup step needs, the prefix index's
// lookup structure. Open addressing with linear probing over a power-of-two
// array of 64-byte slots (one cache line each) holding the full key, so a hit
// costs one probe into one line and a full 32-byte compare; the home slot
// comes straight from the digest's first 8 bytes (uniform for every family,
// block_hash.hpp). Load factor <= 1/2; erase uses backward-shift deletion, so
// there are no tombstones and probe sequences stay as short as after a fresh
// insert.
//
// Besides the record index, a slot carries the record's earliest live block
// of cache group 0 (handle and cache key): with one cache group a walk step
// reads this slot and the allocator's block metadata, and never the record.
#include <cstdint>
#include <vector>

#include "schema/common_types.hpp"
#include "services/prefix/block_hash.hpp"

namespace kvrt {

struct DigestSlotValue {
  static constexpr uint32_t kTail = 1;  // flags bit: the record is an immutable partial tail

  uint32_t record = UINT32_MAX;
  uint32_t flags = 0;
  PhysicalBlockHandle primary;  // earliest live block of group 0, when primary_key is set
  CacheKey primary_key;         // its cache key; kNoCacheKey = the record has no group-0 block
};

class DigestTable {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  // The value of `key`, or nullptr.
  const DigestSlotValue* find(const BlockHash& key) const {
    if (size_ == 0) return nullptr;
    for (size_t i = key.prefix64() & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value.record == kMissing) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  DigestSlotValue* find_mutable(const BlockHash& key) {
    return const_cast<DigestSlotValue*>(static_cast<const DigestTable*>(this)->find(key));
  }
  // The record index of `key`, or kMissing.
  uint32_t record_of(const BlockHash& key) const {
    const DigestSlotValue* v = find(key);
    return v == nullptr ? kMissing : v->record;
  }
  // Starts loading the home slot of `key` (walks probe ahead of use).
  void prefetch(const BlockHash& key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[key.prefix64() & mask_]);
  }
  // Inserts a key that is not present (asserted).
  void insert(const BlockHash& key, const DigestSlotValue& value);
  // Removes a present key; returns false when it was absent.
  bool erase(const BlockHash& key);
  void clear();

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  // Every (key, value) pair, in slot order (validate() and tests).
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& s : slots_)
      if (s.value.record != kMissing) fn(s.key, s.value);
  }
  // Every key sits at or after its home slot with no empty slot in between.
  bool probe_sequences_intact() const;

 private:
  struct alignas(64) Slot {
    BlockHash key;
    DigestSlotValue value;
  };
  static_assert(sizeof(Slot) == 64, "one slot per cache line");
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace kvrt
