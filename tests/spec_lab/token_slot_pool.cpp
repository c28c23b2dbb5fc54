#include "tests/spec_lab/token_slot_pool.hpp"

#include <string>

namespace kvrt {

namespace {
constexpr uint64_t kPrivateTag = uint64_t{0x50} << 56;  // 'P'
constexpr uint64_t kTreeTag = uint64_t{0x54} << 56;     // 'T'
}  // namespace

std::string_view to_string(SlotState state) {
  switch (state) {
    case SlotState::free:
      return "free";
    case SlotState::request_private:
      return "request-private";
    case SlotState::tree_owned:
      return "tree-owned";
  }
  return "unknown";
}

TokenSlotPool::TokenSlotPool(uint32_t slots)
    : state_(size_t{slots} + 1, SlotState::free),
      owner_(size_t{slots} + 1),
      token_(size_t{slots} + 1, 0),
      depth_(size_t{slots} + 1, 0),
      next_(size_t{slots} + 1, 0),
      prev_(size_t{slots} + 1, 0) {
  KVRT_ASSERT(slots < UINT32_MAX, "pool too large");
  for (uint32_t s = 1; s <= slots; ++s) append_free(s);
}

MultisetDigest::Entry TokenSlotPool::entry(uint64_t s) const {
  if (state_[s] == SlotState::request_private) return {kPrivateTag ^ s, owner_[s].value, 0, 0};
  return {kTreeTag ^ s, static_cast<uint64_t>(token_[s]), depth_[s], 0};
}

void TokenSlotPool::append_free(uint64_t s) {
  const uint32_t tail = prev_[0];
  next_[tail] = static_cast<uint32_t>(s);
  prev_[s] = tail;
  next_[s] = 0;
  prev_[0] = static_cast<uint32_t>(s);
  state_[s] = SlotState::free;
  ++free_count_;
}

void TokenSlotPool::unlink(uint64_t s) {
  next_[prev_[s]] = next_[s];
  prev_[next_[s]] = prev_[s];
  next_[s] = prev_[s] = 0;
  --free_count_;
}

std::vector<TokenSlotId> TokenSlotPool::peek_free(uint32_t n) const {
  std::vector<TokenSlotId> out;
  for (uint32_t s = next_[0]; s != 0 && out.size() < n; s = next_[s]) out.push_back(TokenSlotId{s});
  return out;
}

Result<std::vector<TokenSlotId>> TokenSlotPool::reserve(RequestId request, uint32_t n) {
  if (n > free_count_)
    return make_error(ErrorCode::storage_exhausted,
                      "reserve of " + std::to_string(n) + " slots with " + std::to_string(free_count_) + " free",
                      "slots");
  std::vector<TokenSlotId> out = peek_free(n);
  for (TokenSlotId s : out) claim(s, request);
  return out;
}

void TokenSlotPool::claim(TokenSlotId s, RequestId request) {
  KVRT_ASSERT(contains(s) && state_[s.value] == SlotState::free, "claiming a slot that is not free");
  unlink(s.value);
  state_[s.value] = SlotState::request_private;
  owner_[s.value] = request;
  ++private_count_;
  digest_.add(entry(s.value));
}

void TokenSlotPool::adopt(TokenSlotId s, TokenId token, uint32_t depth) {
  KVRT_ASSERT(contains(s) && state_[s.value] == SlotState::request_private, "only private slots are published");
  digest_.remove(entry(s.value));
  state_[s.value] = SlotState::tree_owned;
  owner_[s.value] = RequestId{};
  token_[s.value] = token;
  depth_[s.value] = depth;
  --private_count_;
  ++tree_count_;
  digest_.add(entry(s.value));
}

void TokenSlotPool::release(TokenSlotId s) {
  KVRT_ASSERT(contains(s) && state_[s.value] != SlotState::free, "releasing a slot that is already free");
  digest_.remove(entry(s.value));
  if (state_[s.value] == SlotState::request_private)
    --private_count_;
  else
    --tree_count_;
  owner_[s.value] = RequestId{};
  token_[s.value] = 0;
  depth_[s.value] = 0;
  append_free(s.value);
}

Status TokenSlotPool::validate() const {
  auto broken = [](const std::string& what) {
    return make_error(ErrorCode::invariant_violated, "token slot pool invariant: " + what, "validate");
  };
  uint32_t free = 0, priv = 0, tree = 0;
  MultisetDigest recomputed;
  for (uint64_t s = 1; s < state_.size(); ++s) {
    switch (state_[s]) {
      case SlotState::free:
        ++free;
        break;
      case SlotState::request_private:
        ++priv;
        recomputed.add(entry(s));
        break;
      case SlotState::tree_owned:
        ++tree;
        recomputed.add(entry(s));
        break;
    }
  }
  if (free != free_count_ || priv != private_count_ || tree != tree_count_) return broken("partition counters drifted");
  if (free + priv + tree != size()) return broken("T + R + F != pool");
  // The free queue holds exactly the free slots, each once, linked both ways.
  uint32_t walked = 0;
  for (uint32_t s = next_[0], prev = 0; s != 0; prev = s, s = next_[s]) {
    if (s >= state_.size() || state_[s] != SlotState::free || prev_[s] != prev || ++walked > free)
      return broken("free queue is corrupt at slot " + std::to_string(s));
  }
  if (walked != free) return broken("free queue misses free slots");
  if (recomputed.value() != digest_.value()) return broken("digest differs from the recomputed one");
  return Status::success();
}

}  // namespace kvrt
