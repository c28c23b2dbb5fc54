#pragma once
// TokenSlotPool: the physical token slots Ω of spec 0x08A and their
// partition into tree-owned T, request-private R and free F:
//
//   T ∩ R = T ∩ F = R ∩ F = ∅,   |T| + |R| + |F| = |Ω|        [slots]
//
// One slot holds one token's K/V rows (page size 1 addressing). Slot ids are
// 1..size. Free slots form a FIFO queue (an intrusive doubly linked list, so
// a named free slot can be claimed from the middle in O(1)); released slots
// join its tail, as SGLang's token_to_kv_pool frees do.
//
// The pool is bookkeeping only: it records who owns each slot and checks
// every transition's precondition with an assertion (callers validate caller
// input first and report typed errors). Its digest covers every non-free
// slot: (slot, requesting request) while private, (slot, token, path depth)
// once tree-owned, which binds each stored token to its slot and position.
#include <cstdint>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/receipt_ids.hpp"
#include "services/common/result.hpp"
#include "services/common/state_digest.hpp"
#include "services/radix/radix_options.hpp"

namespace kvrt {

enum class SlotState : uint8_t { free, request_private, tree_owned };
std::string_view to_string(SlotState state);

class TokenSlotPool {
 public:
  explicit TokenSlotPool(uint32_t slots);

  uint32_t size() const { return static_cast<uint32_t>(state_.size() - 1); }  // |Ω| [slots]
  uint32_t free_count() const { return free_count_; }                         // |F|
  uint32_t private_count() const { return private_count_; }                   // |R|
  uint32_t tree_count() const { return tree_count_; }                         // |T|

  bool contains(TokenSlotId s) const { return s.value >= 1 && s.value < state_.size(); }
  SlotState state(TokenSlotId s) const { return state_[s.value]; }
  RequestId private_owner(TokenSlotId s) const { return owner_[s.value]; }
  // The next n slots the free queue would hand out, front first (read only).
  std::vector<TokenSlotId> peek_free(uint32_t n) const;

  // free -> private: the first n slots of the free queue.
  Result<std::vector<TokenSlotId>> reserve(RequestId request, uint32_t n);
  // free -> private: one named free slot.
  void claim(TokenSlotId s, RequestId request);
  // private -> tree-owned, recording which token at which path depth it holds.
  void adopt(TokenSlotId s, TokenId token, uint32_t depth);
  // private or tree-owned -> free (tail of the queue).
  void release(TokenSlotId s);

  StateDigest state_digest() const { return digest_.value(); }
  Status validate() const;

 private:
  MultisetDigest::Entry entry(uint64_t s) const;
  void unlink(uint64_t s);
  void append_free(uint64_t s);

  // Index 0 of every array is the free list's sentinel.
  std::vector<SlotState> state_;
  std::vector<RequestId> owner_;  // request of a private slot
  std::vector<TokenId> token_;    // token of a tree-owned slot
  std::vector<uint32_t> depth_;   // path depth of a tree-owned slot [tokens]
  std::vector<uint32_t> next_, prev_;
  uint32_t free_count_ = 0, private_count_ = 0, tree_count_ = 0;
  MultisetDigest digest_;
};

}  // namespace kvrt
