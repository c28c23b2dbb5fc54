#pragma once
// Strong identifier types (docs/conventions.md habit 3): a BlockId cannot be passed where
// a PoolId is expected, and none converts silently to an integer.
#include <compare>
#include <cstdint>
#include <functional>

namespace kvrt {

template <class Tag, class Rep = uint32_t>
struct StrongId {
  using rep_type = Rep;
  Rep value{};
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  friend constexpr bool operator==(StrongId, StrongId) = default;
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
};

using CacheGroupId = StrongId<struct CacheGroupIdTag>;
using PoolId = StrongId<struct PoolIdTag>;
using PoolGeneration = StrongId<struct PoolGenerationTag>;
using PhysicalBlockId = StrongId<struct PhysicalBlockIdTag>;  // identity, not a slot
using PhysicalSlot = StrongId<struct PhysicalSlotTag>;        // position inside a pool
using BlockGeneration = StrongId<struct BlockGenerationTag>;
using RequestId = StrongId<struct RequestIdTag, uint64_t>;
using RequestGeneration = StrongId<struct RequestGenerationTag>;
using TableVersion = StrongId<struct TableVersionTag, uint64_t>;
using NamespaceGeneration = StrongId<struct NamespaceGenerationTag, uint64_t>;
using Epoch = StrongId<struct EpochTag, uint64_t>;
// A worker's session on the node (one per connected kvrt::Client).
using SessionId = StrongId<struct SessionIdTag, uint64_t>;

// A block's weak cache identity (0x04B): the prefix index gives it to a full
// block it publishes, the allocator drops it when it recycles the block. The
// allocator only compares keys; what a key encodes is the index's business
// (PrefixIndex::key_of). CacheKey{} (kNoCacheKey) is no identity.
using CacheKey = StrongId<struct CacheKeyValueTag, uint64_t>;
inline constexpr CacheKey kNoCacheKey{};

// A token id as it appears in a request (0x08A X_v[i]): a vocabulary index.
// 32 bits: every tokenizer vocabulary fits, and an index match streams stored
// ids from memory, so the id width is the match cost (4 bytes per compared
// token). A front end with wider keys interns them to dense ids first (the
// replay drivers do); indexes only compare ids for equality, and hash messages
// encode each id as 4 little-endian bytes.
using TokenId = int32_t;

}  // namespace kvrt

template <class Tag, class Rep>
struct std::hash<kvrt::StrongId<Tag, Rep>> {
  size_t operator()(kvrt::StrongId<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value); }
};
