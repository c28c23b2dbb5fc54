#pragma once
// Intrusive doubly linked queue over block indices of one pool (the vLLM v1
// free-queue shape, docs/conventions.md): links live in the block metadata, so push,
// pop and removal from the middle are O(1) with no allocation. A block is in
// at most one queue at a time; kNoBlock marks "not linked".
#include <cstdint>
#include <vector>

#include "services/common/assert.hpp"

namespace kvrt {

inline constexpr uint32_t kNoBlock = UINT32_MAX;

// Links stored by the owner, one pair per block.
struct QueueLinks {
  uint32_t prev = kNoBlock;
  uint32_t next = kNoBlock;
};

class BlockQueue {
 public:
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t front() const { return head_; }
  uint32_t back() const { return tail_; }

  template <class LinksOf>
  void push_back(uint32_t b, LinksOf&& links) {
    QueueLinks& l = links(b);
    l.prev = tail_;
    l.next = kNoBlock;
    if (tail_ != kNoBlock)
      links(tail_).next = b;
    else
      head_ = b;
    tail_ = b;
    ++size_;
  }

  template <class LinksOf>
  void push_front(uint32_t b, LinksOf&& links) {
    QueueLinks& l = links(b);
    l.prev = kNoBlock;
    l.next = head_;
    if (head_ != kNoBlock)
      links(head_).prev = b;
    else
      tail_ = b;
    head_ = b;
    ++size_;
  }

  template <class LinksOf>
  void remove(uint32_t b, LinksOf&& links) {
    QueueLinks& l = links(b);
    if (l.prev != kNoBlock)
      links(l.prev).next = l.next;
    else
      head_ = l.next;
    if (l.next != kNoBlock)
      links(l.next).prev = l.prev;
    else
      tail_ = l.prev;
    l.prev = l.next = kNoBlock;
    KVRT_ASSERT(size_ > 0, "remove from an empty BlockQueue");
    --size_;
  }

  // Removal that can be undone: relinking removed blocks in reverse order of
  // removal restores the queue exactly (used by transaction rollback).
  struct Unlinked {
    uint32_t block, prev, next;
  };
  template <class LinksOf>
  Unlinked remove_logged(uint32_t b, LinksOf&& links) {
    const Unlinked u{b, links(b).prev, links(b).next};
    remove(b, links);
    return u;
  }
  template <class LinksOf>
  void relink(const Unlinked& u, LinksOf&& links) {
    QueueLinks& l = links(u.block);
    l.prev = u.prev;
    l.next = u.next;
    if (u.prev != kNoBlock)
      links(u.prev).next = u.block;
    else
      head_ = u.block;
    if (u.next != kNoBlock)
      links(u.next).prev = u.block;
    else
      tail_ = u.block;
    ++size_;
  }

  template <class LinksOf>
  uint32_t pop_front(LinksOf&& links) {
    const uint32_t b = head_;
    KVRT_ASSERT(b != kNoBlock, "pop_front on an empty BlockQueue");
    remove(b, links);
    return b;
  }

  // Walks the queue front to back (validate() and tests only).
  template <class LinksOf>
  std::vector<uint32_t> members(LinksOf&& links) const {
    std::vector<uint32_t> out;
    for (uint32_t b = head_; b != kNoBlock && out.size() <= size_; b = links(b).next) out.push_back(b);
    return out;
  }

 private:
  uint32_t head_ = kNoBlock;
  uint32_t tail_ = kNoBlock;
  uint32_t size_ = 0;
};

}  // namespace kvrt
