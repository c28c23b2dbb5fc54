#include "services/radix/edge_store.hpp"

#include <bit>

#include "services/common/assert.hpp"

namespace kvrt {

// Classes 0..7 are exact (1..8 words); above, each power of two [2^k, 2^(k+1))
// splits into 4 classes of width 2^(k-2).
size_t EdgeStore::size_class(size_t words) {
  KVRT_ASSERT(words > 0, "an empty block");
  if (words <= 8) return words - 1;
  const size_t k = std::bit_width(words - 1) - 1;  // 2^k < words <= 2^(k+1)
  const size_t step = size_t{1} << (k - 2);
  const size_t quarter = (words - 1 - (size_t{1} << k)) / step;  // 0..3
  return 8 + (k - 3) * 4 + quarter;
}

size_t EdgeStore::class_words(size_t c) {
  if (c < 8) return c + 1;
  const size_t k = (c - 8) / 4 + 3;
  const size_t quarter = (c - 8) % 4;
  return (size_t{1} << k) + (quarter + 1) * (size_t{1} << (k - 2));
}

EdgeStore::Block EdgeStore::acquire(size_t words) {
  const size_t c = size_class(words);
  if (free_.size() <= c) free_.resize(c + 1);
  if (!free_[c].empty()) {
    uint64_t* block = free_[c].back();
    free_[c].pop_back();
    return Block{block, static_cast<uint32_t>(c)};
  }
  const size_t n = class_words(c);
  KVRT_ASSERT(n >= words, "size class smaller than the request");
  blocks_.push_back(std::make_unique_for_overwrite<uint64_t[]>(n));
  reserved_words_ += n;
  return Block{blocks_.back().get(), static_cast<uint32_t>(c)};
}

void EdgeStore::clear() {
  free_.clear();
  blocks_.clear();
  reserved_words_ = 0;
}

}  // namespace kvrt
