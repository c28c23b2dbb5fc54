#include "services/radix/edge_segment.hpp"

#include "services/common/assert.hpp"

namespace kvrt {

EdgeSegment EdgeSegment::copy_of(EdgeStore& store, const TokenId* tokens, const TokenSlotId* slots, uint32_t length) {
  EdgeSegment e;
  const EdgeStore::Block block = store.acquire(block_words(length));
  e.words_ = block.words;
  e.size_class_ = block.size_class;
  e.capacity_ = length;
  e.length_ = length;
  std::memcpy(e.words_, slots, size_t{length} * sizeof(TokenSlotId));
  std::memcpy(e.words_ + length, tokens, size_t{length} * sizeof(TokenId));
  return e;
}

EdgeSegment::EdgeSegment(EdgeStore& store, std::span<const TokenId> tokens, std::span<const TokenSlotId> slots) {
  KVRT_ASSERT(tokens.size() == slots.size(), "an edge owns equal token and slot segments (0x08A)");
  KVRT_ASSERT(!tokens.empty() && tokens.size() <= UINT32_MAX, "an edge holds 1 to 2^32 - 1 tokens");
  *this = copy_of(store, tokens.data(), slots.data(), static_cast<uint32_t>(tokens.size()));
}

EdgeSegment EdgeSegment::split_front(EdgeStore& store, uint32_t m) {
  KVRT_ASSERT(m > 0 && m < length_, "a split point lies strictly inside the edge");
  const uint32_t rest = length_ - m;
  if (m <= rest) {
    // Copy the shorter prefix out; the suffix stays in this block.
    EdgeSegment front = copy_of(store, token_data(), slot_data(), m);
    offset_ += m;
    length_ = rest;
    return front;
  }
  // Copy the shorter suffix into a new block for *this; the prefix keeps the
  // old block with a shortened view.
  EdgeSegment back = copy_of(store, token_data() + m, slot_data() + m, rest);
  EdgeSegment front = std::move(*this);
  front.length_ = m;
  *this = std::move(back);
  return front;
}

void EdgeSegment::release(EdgeStore& store) {
  if (words_ != nullptr) store.release(EdgeStore::Block{words_, size_class_});
  words_ = nullptr;
  size_class_ = capacity_ = offset_ = length_ = 0;
}

}  // namespace kvrt
