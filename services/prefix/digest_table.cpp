#include "services/prefix/digest_table.hpp"

#include "services/common/assert.hpp"

namespace kvrt {

void DigestTable::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  size_ = 0;
  for (const Slot& s : old)
    if (s.value.record != kMissing) insert(s.key, s.value);
}

void DigestTable::insert(const BlockHash& key, const DigestSlotValue& value) {
  KVRT_ASSERT(value.record != kMissing, "DigestTable record kMissing is reserved");
  if ((size_ + 1) * 2 > slots_.size()) grow();
  size_t i = key.prefix64() & mask_;
  while (slots_[i].value.record != kMissing) {
    KVRT_ASSERT(!(slots_[i].key == key), "DigestTable::insert of a present key");
    i = (i + 1) & mask_;
  }
  slots_[i] = Slot{key, value};
  ++size_;
}

bool DigestTable::erase(const BlockHash& key) {
  if (size_ == 0) return false;
  size_t i = key.prefix64() & mask_;
  while (true) {
    if (slots_[i].value.record == kMissing) return false;
    if (slots_[i].key == key) break;
    i = (i + 1) & mask_;
  }
  // Backward shift: pull later members of the cluster into the hole when
  // their home slot does not lie cyclically in (hole, j].
  size_t hole = i;
  for (size_t j = (hole + 1) & mask_; slots_[j].value.record != kMissing; j = (j + 1) & mask_) {
    const size_t home = slots_[j].key.prefix64() & mask_;
    const bool home_in_gap = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!home_in_gap) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

void DigestTable::clear() {
  for (Slot& s : slots_) s = Slot{};
  size_ = 0;
}

bool DigestTable::probe_sequences_intact() const {
  size_t count = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].value.record == kMissing) continue;
    ++count;
    for (size_t j = slots_[i].key.prefix64() & mask_; j != i; j = (j + 1) & mask_)
      if (slots_[j].value.record == kMissing) return false;
  }
  return count == size_;
}

}  // namespace kvrt
