#pragma once
// FreeBlockRing: the FIFO of truly FREE blocks of one pool.
//
// A FREE block never leaves this queue from the middle: touch revives only
// EVICTABLE blocks, and an evicted identity turns an EVICTABLE block FREE by
// appending it here. So the free queue needs push_back, pop_front and, for
// transaction rollback, push_front; an array ring gives all three in O(1)
// without the pointer chase of a linked list. Popping the 128 blocks of a
// 2048-token prompt reads 512 contiguous bytes instead of following 128
// dependent links through the block metadata (the linked queue's pop was the
// largest single cost of allocate, perf of `kvrt bench allocator`).
//
// Capacity is fixed at the pool's block count, which bounds membership, so
// push never overflows; 4 bytes per block, counted in metadata_per_block.
#include <cstdint>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt {

class FreeBlockRing {
 public:
  FreeBlockRing() = default;
  explicit FreeBlockRing(uint32_t capacity) : slots_(capacity) {}

  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }

  void push_back(uint32_t block) {
    KVRT_ASSERT(size_ < capacity(), "FreeBlockRing overflow: a block is queued twice");
    slots_[wrap(head_ + size_)] = block;
    ++size_;
  }
  // Rollback returns a reservation to the front, so popping and pushing back
  // in reverse order restores the ring exactly.
  void push_front(uint32_t block) {
    KVRT_ASSERT(size_ < capacity(), "FreeBlockRing overflow: a block is queued twice");
    head_ = head_ == 0 ? capacity() - 1 : head_ - 1;
    slots_[head_] = block;
    ++size_;
  }
  uint32_t pop_front() {
    KVRT_ASSERT(size_ > 0, "pop_front on an empty FreeBlockRing");
    const uint32_t block = slots_[head_];
    head_ = wrap(head_ + 1);
    --size_;
    return block;
  }

  // Bulk forms for the hot loops of allocate and release: the ring's indices
  // stay in registers instead of being stored and reloaded once per block.
  template <class Visit>
  void pop_front_n(uint32_t n, Visit&& visit) {
    KVRT_ASSERT(n <= size_, "pop_front_n past the back of a FreeBlockRing");
    uint32_t head = head_;
    const uint32_t cap = capacity();
    for (uint32_t i = 0; i < n; ++i) {
      visit(slots_[head]);
      head = head + 1 == cap ? 0 : head + 1;
    }
    head_ = head;
    size_ -= n;
  }
  void push_back_n(const uint32_t* blocks, uint32_t n) {
    KVRT_ASSERT(size_ + n <= capacity(), "FreeBlockRing overflow: a block is queued twice");
    uint32_t tail = wrap(head_ + size_);
    const uint32_t cap = capacity();
    for (uint32_t i = 0; i < n; ++i) {
      slots_[tail] = blocks[i];
      tail = tail + 1 == cap ? 0 : tail + 1;
    }
    size_ += n;
  }

  // Front to back (validate() and tests only).
  std::vector<uint32_t> members() const {
    std::vector<uint32_t> out;
    out.reserve(size_);
    for (uint32_t i = 0; i < size_; ++i) out.push_back(slots_[wrap(head_ + i)]);
    return out;
  }

 private:
  // head_ + size_ < 2 * capacity, so one conditional subtraction wraps.
  uint32_t wrap(uint32_t i) const { return i >= capacity() ? i - capacity() : i; }

  std::vector<uint32_t> slots_;
  uint32_t head_ = 0;
  uint32_t size_ = 0;
};

}  // namespace kvrt
