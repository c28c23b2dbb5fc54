#pragma once
// The immutable header at offset 0 of every pool segment. Only offsets cross
// process boundaries (docs/stack-notes.md), so the header holds everything an attacher
// needs to address the payload without the owner's help: identity (pool id,
// pool generation, cache group, layout digest), shape, and the K/V tensor
// ranges. It is written once by the creating owner and never again; both sides
// map its page read-only once it is published.
//
// Publication: the owner fills every field, then stores ready = 1 with release
// semantics; an attacher loads ready with acquire semantics before trusting
// any other field, so it never sees a half-initialised header.
//
// The first 32 bytes (magic, format version, ready, owner) are format-stable:
// a later format keeps them where they are, so any kvrt build can tell who owns
// a segment and whether that owner is gone, whatever its format.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/process_identity.hpp"
#include "services/common/result.hpp"
#include "shm/pool_geometry.hpp"

namespace kvrt::shm {

inline constexpr uint64_t kPoolSegmentMagic = 0x4C4F4F505452564BULL;  // "KVRTPOOL" in little-endian bytes
inline constexpr uint32_t kPoolSegmentFormat = 1;
inline constexpr uint64_t kOwnerPrefixBytes = 32;  // [bytes] format-stable prefix

struct PoolSegmentHeader {
  // Format-stable prefix, written with pwrite(2) before the segment is sized so
  // that an owner is on record from the first microseconds (stale detection).
  uint64_t magic;
  uint32_t format_version;
  uint32_t ready;  // 0 until published; 1 after (release store, acquire load)
  int32_t owner_pid;
  uint32_t prefix_reserved;   // zero
  uint64_t owner_start_time;  // /proc/<pid>/stat field 22 [clock ticks since boot]
  // Format 1 body.
  uint32_t header_bytes;  // kHeaderBytes
  uint32_t pool_id;
  uint32_t pool_generation;
  uint32_t cache_group_id;
  uint8_t layout_digest[32];  // SHA-256 of the CacheLayoutManifest (0x01A)
  uint32_t layers;            // [layers]
  uint32_t kv_heads;          // [heads]
  uint32_t head_dim;          // [lanes]
  uint32_t block_tokens;      // P_a [tokens / block]
  uint32_t capacity_blocks;   // [blocks]
  uint8_t k_dtype;            // ScalarType value
  uint8_t v_dtype;
  uint8_t axis_order[5];     // TensorAxis values, outermost first
  uint8_t body_reserved[5];  // zero; pads the byte fields to an 8-byte boundary
  uint64_t k_offset;         // [bytes] from the segment start
  uint64_t k_bytes;
  uint64_t v_offset;
  uint64_t v_bytes;
  uint64_t segment_bytes;  // [bytes] file size the owner allocated
};
static_assert(std::is_standard_layout_v<PoolSegmentHeader> && std::is_trivially_copyable_v<PoolSegmentHeader>);
static_assert(offsetof(PoolSegmentHeader, ready) == 12 && offsetof(PoolSegmentHeader, owner_pid) == 16 &&
              offsetof(PoolSegmentHeader, owner_start_time) == 24 &&
              offsetof(PoolSegmentHeader, header_bytes) == kOwnerPrefixBytes);
static_assert(offsetof(PoolSegmentHeader, k_offset) % 8 == 0 && sizeof(PoolSegmentHeader) == 152);
static_assert(sizeof(PoolSegmentHeader) <= kHeaderBytes);

// What a published header says, after every check.
struct PoolSegmentInfo {
  PoolId pool_id;
  PoolGeneration pool_generation;
  CacheGroupId group;
  Sha256Digest layout_digest;
  ProcessIdentity owner;
  PoolGeometry geometry;
};

// A complete header (ready = 0) for a new segment.
PoolSegmentHeader make_header(const PoolSegmentInfo& info);

// Checks a copy of a header taken after an acquire load saw ready == 1:
// decode_failed for a wrong magic, an unpublished header, an inconsistent
// shape, recorded tensor ranges that differ from the ones the shape implies,
// or a file shorter or longer than segment_bytes ("truncated");
// incompatible for another format version. file_bytes is the segment's size
// as fstat(2) reports it [bytes].
Result<PoolSegmentInfo> decode_header(const PoolSegmentHeader& header, uint64_t file_bytes);

}  // namespace kvrt::shm
