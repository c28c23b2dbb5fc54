#pragma once
// SharedBlockPools: "pools + allocator" in one call. From a layout
// manifest and a capacity it creates one POSIX shared-memory pool per cache
// group (block_pool_segment.hpp), a ShmPayloadStore over them, and the
// BlockAllocator whose configuration names exactly those pools, so that the
// allocator's receipts and the pools' byte offsets cannot disagree on a pool
// id, a pool generation, a capacity or a row size.
//
// Ownership: SharedBlockPools owns the store (and through it the segments)
// and the allocator; the allocator borrows the store by pointer. The store
// lives on the heap, so moving a SharedBlockPools keeps that pointer valid,
// and members are declared store first so the allocator is destroyed before
// the bytes it points at. Destroying (or moving from and destroying) the
// object removes every segment name: the clean-shutdown path.
// Creation goes through BlockPoolSegment::create_or_replace: a segment left
// by a crashed owner at one of the names is replaced and reported.
//
// Naming, per group index g (the manifest's cache_groups order, which is also
// the allocator's group order):
//   segment  /kvrt.<namespace>.g<namespace generation>.c<group id>.<instance>
//   pool id  first_pool_id + g;  pool generation: one for all groups
//   block id block_id_bases[g] + slot  (slot = pool-local block index, which
//            is what PoolBlockRef names across processes; 0x03F)
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "shm/block_pool_segment.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt::shm {

struct SharedBlockPoolsOptions {
  std::string namespace_name;  // cache namespace (0x0CE)
  NamespaceGeneration namespace_generation;
  std::string instance;                  // node instance, e.g. make_instance_id()
  PoolCapacity capacity;                 // per group pool [blocks], or a budget [bytes] for whole bundles
  PoolId first_pool_id{1};               // group index g gets pool first_pool_id + g
  PoolGeneration pool_generation{1};     // of every group's pool
  std::vector<uint32_t> block_id_bases;  // per group index; empty: 0 for every group (block id == slot)
  // Segments without names (BlockPoolSegment::create_unnamed): handed out
  // by descriptor only, nothing to replace at start or remove at shutdown.
  bool unnamed_segments = false;

  // Allocator policy; the group pools and block_size (P_a) come from the
  // manifest and the pools. See allocator_config.hpp.
  uint64_t initial_epoch = 1;
  uint32_t max_requests = 1 << 16;  // [requests]
  bool zero_on_recycle = false;
  FreeQueuePolicy queue_policy = FreeQueuePolicy::free_first_then_oldest_evictable;
};

// The allocator configuration matching the pools the options describe, with
// B_row,g from CacheGroupLayout::row_bytes() and every group at the same
// capacity [blocks] (capacity_in_blocks). Pure: nothing is created. Errors:
// from the manifest and capacity (invalid_manifest, config_field "capacity"),
// config_field "block_id_bases" (wrong count) or "first_pool_id" (overflow),
// and BlockAllocatorConfig::validate().
Result<BlockAllocatorConfig> shared_pools_allocator_config(const CacheLayoutManifest& manifest,
                                                           const SharedBlockPoolsOptions& options);

// Where a block handle's bytes are: the group index and the pool reference
// another process resolves with BlockPoolSegment::byte_offset / row_runs.
struct PoolBlockLocation {
  uint32_t group_index = 0;
  PoolBlockRef ref;
};

class SharedBlockPools {
 public:
  // Creates every group's segment, the store and the allocator. On any error
  // the segments already created are removed again (nothing is left in
  // /dev/shm). Errors: those of shared_pools_allocator_config, of
  // BlockPoolSegment::create_or_replace (segment_in_use, stale_generation,
  // storage_exhausted, invalid_argument for the name, io), and of
  // ShmPayloadStore::create / check_config.
  static Result<SharedBlockPools> create(const CacheLayoutManifest& manifest, const SharedBlockPoolsOptions& options);

  SharedBlockPools(SharedBlockPools&&) = default;
  SharedBlockPools& operator=(SharedBlockPools&&) = default;

  BlockAllocator& allocator() { return allocator_; }
  const BlockAllocator& allocator() const { return allocator_; }
  ShmPayloadStore& store() { return *store_; }
  const ShmPayloadStore& store() const { return *store_; }
  const BlockAllocatorConfig& config() const { return config_; }
  // Stale segments removed at start-up, one per replaced name.
  const std::vector<SegmentInspection>& replaced() const { return replaced_; }

  // A handle from a receipt -> its pool bytes. Errors, as BlockAllocator::block
  // reports them: unknown_physical ("handle.pool", "handle.block") or
  // unknown_group ("handle.group") for a handle of no pool here, and
  // stale_physical when the block has been recycled under a newer generation
  // since (0x05F): a stale handle never resolves to a new owner's bytes.
  Result<PoolBlockLocation> locate(const PhysicalBlockHandle& handle) const;

 private:
  SharedBlockPools(std::unique_ptr<ShmPayloadStore> store, BlockAllocator allocator, BlockAllocatorConfig config,
                   std::vector<SegmentInspection> replaced)
      : store_(std::move(store)),
        allocator_(std::move(allocator)),
        config_(std::move(config)),
        replaced_(std::move(replaced)) {}

  std::unique_ptr<ShmPayloadStore> store_;  // declared first: destroyed after the allocator
  BlockAllocator allocator_;
  BlockAllocatorConfig config_;
  std::vector<SegmentInspection> replaced_;
};

}  // namespace kvrt::shm
