#pragma once
// One cache group's physical block pool: K and V tensors laid out by the layout
// manifest, in a POSIX shared-memory segment (Boost.Interprocess, /dev/shm).
//
// Ownership (docs/conventions.md habit 5, docs/architecture.md "Rules"): the process that creates a
// segment owns it, and destroying (or moving from and destroying) the owning
// object unmaps and removes the segment; that is the clean-shutdown path.
// Attachers map the same bytes read-write but never remove anything. The pool
// metadata (free lists, refcounts, generations per block) is not here: the
// allocator owns it in its own process. Other processes touch only payload
// bytes named by (pool id, pool generation, block id) and receive offsets,
// never pointers, since each process maps the segment at its own address.
//
// A crashed owner leaves its segment behind (POSIX shared memory outlives
// processes). create_or_replace() detects that at start-up from the owner
// identity in the header and replaces it; a live owner's segment is kept.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/process_identity.hpp"
#include "services/common/result.hpp"
#include "services/common/unique_fd.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "shm/pool_geometry.hpp"
#include "shm/segment_name.hpp"

namespace kvrt::shm {

struct PoolSegmentOptions {
  PoolSegmentName name;  // namespace, its generation, instance, and name.group:
                         // the manifest's cache group this pool holds
  PoolId pool_id;
  PoolGeneration pool_generation;  // bumped by the allocator whenever a pool is rebuilt
  PoolCapacity capacity;           // from config: blocks, or a byte budget (see capacity_in_blocks)
};

// A pool's block address as another process names it. The block id here is
// the pool-local slot index: the allocator keeps the map from its
// PhysicalBlockId identities to slots (0x03F: block 2001 lives in slot 6) and
// names the slot in what it hands to other processes.
struct PoolBlockRef {
  PoolId pool;
  PoolGeneration generation;
  PhysicalSlot block;
};

// What start-up found at a segment's name (create_or_replace, inspect).
struct SegmentInspection {
  std::string name;
  bool owner_recorded = false;                    // the format-stable prefix was written
  ProcessIdentity owner;                          // valid when owner_recorded
  OwnerState owner_state = OwnerState::alive;     // meaningful when owner_recorded
  bool published = false;                         // ready flag set
  std::optional<PoolGeneration> pool_generation;  // when published
  uint64_t file_bytes = 0;                        // [bytes]
};

struct CreatedSegment;
namespace detail {
struct SegmentMapping;  // file, mapping and decoded header; defined in the .cpp
}

class BlockPoolSegment {
 public:
  // Creates and owns a new segment. The file is sized and fully allocated
  // (posix_fallocate) before anything touches it, so a pool /dev/shm cannot
  // hold fails here with storage_exhausted instead of SIGBUS on first write
  // (docs/stack-notes.md). Payload bytes start zeroed. Errors: from the manifest and
  // capacity (invalid_manifest, unknown_group, config_field), the name
  // (invalid_argument), an existing segment of that name (segment_in_use),
  // storage_exhausted, io.
  static Result<BlockPoolSegment> create(const CacheLayoutManifest& manifest, const PoolSegmentOptions& options);

  // Start-up path: as create(), but a segment left at the name by an owner
  // that has exited (or whose pid now belongs to a later process) is removed
  // first and reported. A live owner's segment is kept (segment_in_use). The
  // new pool generation must be newer than a published stale one, otherwise
  // receipts naming the dead pool would read the new pool's bytes as their own
  // (stale_generation, and the stale segment is kept). A segment without an
  // owner record, or with another magic, is never removed (segment_in_use,
  // decode_failed).
  static Result<CreatedSegment> create_or_replace(const CacheLayoutManifest& manifest,
                                                  const PoolSegmentOptions& options);

  // Maps an existing segment read-write. Errors: io (no segment of that name),
  // decode_failed (bad magic, unpublished or truncated header), incompatible
  // (other format version, or layout digest differs from expected),
  // stale_generation (the pool was rebuilt under another generation).
  static Result<BlockPoolSegment> attach(std::string_view name, PoolGeneration expected_generation,
                                         const Sha256Digest& expected_layout_digest);

  // As create(), but the segment never has a name (SegmentFile::create_unnamed):
  // no other process can open it; the owner hands its descriptor() to the
  // processes it chooses (the node: to sessions granted its pools), and the
  // memory goes when the last holder does, so a crash leaves nothing in
  // /dev/shm. Its size is sealed once published. Same errors as create()
  // but segment_in_use.
  static Result<BlockPoolSegment> create_unnamed(const CacheLayoutManifest& manifest,
                                                 const PoolSegmentOptions& options);

  // attach() for a received descriptor of an unnamed segment. Errors: those
  // of attach(), and pool_size_mismatch when the descriptor is not sealed
  // against shrink and grow (not an owner's published segment).
  static Result<BlockPoolSegment> attach_descriptor(UniqueFd descriptor, std::string_view label,
                                                    PoolGeneration expected_generation,
                                                    const Sha256Digest& expected_layout_digest);

  // Reads the owner record and generation at a name without mapping the
  // payload. Errors: io (no such segment), decode_failed (not a kvrt pool).
  static Result<SegmentInspection> inspect(std::string_view name);

  // Administrative unlink by name (tests, operator tooling). Mappings that
  // exist stay valid; the name is free at once. Errors: io.
  static Status remove(std::string_view name);

  // Operator cleanup after a crash (`kvrt segments --remove-stale`): unlinks
  // the segment at `name` only if its recorded owner has exited or its pid
  // now belongs to a later process, and only the very file that was judged
  // (a creator racing for the name keeps its new file). Answers what was
  // found and whether it was removed. A live owner's segment, one without an
  // owner record and a non-kvrt file are kept. Errors: io, decode_failed.
  struct StaleRemoval {
    SegmentInspection found;
    bool removed = false;
  };
  static Result<StaleRemoval> remove_if_stale(std::string_view name);

  BlockPoolSegment(BlockPoolSegment&&) noexcept;
  BlockPoolSegment& operator=(BlockPoolSegment&&) noexcept;
  BlockPoolSegment(const BlockPoolSegment&) = delete;
  BlockPoolSegment& operator=(const BlockPoolSegment&) = delete;
  ~BlockPoolSegment();

  const std::string& name() const;
  bool is_owner() const;
  bool unnamed() const;
  int descriptor() const;  // borrowed: valid while this segment lives
  PoolId pool_id() const;
  PoolGeneration pool_generation() const;
  CacheGroupId group() const;
  const Sha256Digest& layout_digest() const;
  ProcessIdentity owner() const;
  const PoolGeometry& geometry() const;
  uint32_t capacity_blocks() const { return geometry().shape().capacity_blocks; }

  // (pool, generation, block) + coordinate -> segment byte offset (0x03E).
  // Errors: unknown_physical (another pool id), stale_generation (another
  // pool generation), coordinate_out_of_range (field names the coordinate).
  Result<uint64_t> byte_offset(const PoolBlockRef& ref, const KvCoordinate& c) const;
  // lane_count contiguous lanes of one head, as bytes of this mapping
  // (writable through a non-const handle only).
  Result<std::span<uint8_t>> lanes(const PoolBlockRef& ref, const KvCoordinate& c, uint32_t lane_count);
  Result<std::span<const uint8_t>> lanes(const PoolBlockRef& ref, const KvCoordinate& c, uint32_t lane_count) const;
  // Rows [token_begin, token_end) of one block as contiguous runs; resolve each
  // run with bytes(). Same errors as byte_offset, plus "token_range".
  Result<RowRuns> row_runs(const PoolBlockRef& ref, TensorKind kind, uint32_t token_begin, uint32_t token_end) const;
  // The bytes of a run inside the K or V tensor. Errors: address_out_of_tensor.
  Result<std::span<uint8_t>> bytes(const ByteRun& run);
  Result<std::span<const uint8_t>> bytes(const ByteRun& run) const;

 private:
  explicit BlockPoolSegment(std::unique_ptr<detail::SegmentMapping> mapping);
  Status check_ref(const PoolBlockRef& ref) const;
  detail::SegmentMapping& live() const;  // asserts: not moved from
  static std::span<uint8_t> writable(std::span<const uint8_t> view);
  std::unique_ptr<detail::SegmentMapping> m_;
};

struct CreatedSegment {
  BlockPoolSegment segment;
  std::optional<SegmentInspection> replaced;  // the stale segment removed first, if any
};

}  // namespace kvrt::shm
