#pragma once
// EdgeSegment: the compressed edge E_v = (X_v, S_v) of one radix node
// (spec 0x08A): m token ids and the m K/V token slots that hold their rows,
// |X_v| = |S_v| = m by construction (one buffer, one length).
//
// Layout: one EdgeStore block per edge, slot ids (64-bit) in words
// [0, capacity), token ids (32-bit) packed after them; the live view is
// [offset, offset + length) of both arrays. A split (0x08B) partitions the
// view: it copies the shorter side into a new block and keeps the longer side
// in place by moving `offset` or shrinking `length`, so a split costs
// O(min(m, len - m)) and never touches a K/V payload. The kept block may hold
// dead entries outside the view; they are bounded by the edge's original
// length and recycled with the node.
//
// The block belongs to the tree's EdgeStore: a segment is a move-only view
// that the tree returns with release() when its node goes.
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>

#include "services/common/receipt_ids.hpp"
#include "services/radix/edge_store.hpp"
#include "services/radix/radix_options.hpp"

namespace kvrt {

static_assert(sizeof(TokenSlotId) == sizeof(uint64_t) && std::is_trivially_copyable_v<TokenSlotId>,
              "slot ids are stored as raw 64-bit words");

class EdgeSegment {
 public:
  EdgeSegment() = default;
  // Copies `tokens` and `slots` (equal lengths) into a block of `store`.
  EdgeSegment(EdgeStore& store, std::span<const TokenId> tokens, std::span<const TokenSlotId> slots);
  EdgeSegment(EdgeSegment&& other) noexcept { *this = std::move(other); }
  EdgeSegment& operator=(EdgeSegment&& other) noexcept {
    words_ = std::exchange(other.words_, nullptr);
    size_class_ = std::exchange(other.size_class_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    offset_ = std::exchange(other.offset_, 0);
    length_ = std::exchange(other.length_, 0);
    return *this;
  }
  EdgeSegment(const EdgeSegment&) = delete;
  EdgeSegment& operator=(const EdgeSegment&) = delete;

  uint32_t size() const { return length_; }  // m [tokens] = [slots]
  bool empty() const { return length_ == 0; }
  const TokenSlotId* slot_data() const { return reinterpret_cast<const TokenSlotId*>(words_) + offset_; }
  const TokenId* token_data() const { return reinterpret_cast<const TokenId*>(words_ + capacity_) + offset_; }
  std::span<const TokenId> tokens() const { return {token_data(), length_}; }
  std::span<const TokenSlotId> slots() const { return {slot_data(), length_}; }

  // Partitions the edge at m (0 < m < size()): returns the segment holding
  // positions [0, m) and keeps [m, size) in *this (0x08B X_shared / X_old).
  EdgeSegment split_front(EdgeStore& store, uint32_t m);
  // Gives the block back to `store`; the segment becomes empty.
  void release(EdgeStore& store);

 private:
  static size_t block_words(uint32_t capacity) {
    return capacity + (size_t{capacity} * sizeof(TokenId) + sizeof(uint64_t) - 1) / sizeof(uint64_t);
  }
  static EdgeSegment copy_of(EdgeStore& store, const TokenId* tokens, const TokenSlotId* slots, uint32_t length);

  uint64_t* words_ = nullptr;  // EdgeStore block
  uint32_t size_class_ = 0;    // of the block, for its return to the store
  uint32_t capacity_ = 0;      // entries per array
  uint32_t offset_ = 0;        // first live position
  uint32_t length_ = 0;        // live positions
};

}  // namespace kvrt
