#include "shm/shared_block_pools.hpp"

#include <string>
#include <utility>

namespace kvrt::shm {

Result<BlockAllocatorConfig> shared_pools_allocator_config(const CacheLayoutManifest& manifest,
                                                           const SharedBlockPoolsOptions& options) {
  uint32_t capacity = 0;
  KVRT_TRY_ASSIGN(capacity, capacity_in_blocks(manifest, options.capacity));  // validates the manifest
  const size_t groups = manifest.cache_groups.size();
  if (!options.block_id_bases.empty() && options.block_id_bases.size() != groups)
    return make_error(ErrorCode::config_field,
                      std::to_string(options.block_id_bases.size()) + " block id bases for " + std::to_string(groups) +
                          " cache groups",
                      "block_id_bases");
  if (uint64_t{options.first_pool_id.value} + groups - 1 > UINT32_MAX)
    return make_error(ErrorCode::config_field,
                      "pool ids from " + std::to_string(options.first_pool_id.value) + " for " +
                          std::to_string(groups) + " groups overflow 32 bits",
                      "first_pool_id");
  BlockAllocatorConfig config;
  config.block_size = manifest.allocator_block_size;
  config.initial_epoch = options.initial_epoch;
  config.max_requests = options.max_requests;
  config.zero_on_recycle = options.zero_on_recycle;
  config.queue_policy = options.queue_policy;
  for (size_t g = 0; g < groups; ++g) {
    const CacheGroupLayout& layout = manifest.cache_groups[g];
    GroupPoolConfig pool;
    pool.group = layout.group_id;
    pool.pool = PoolId{options.first_pool_id.value + static_cast<uint32_t>(g)};
    pool.pool_generation = options.pool_generation;
    pool.capacity_blocks = capacity;
    pool.block_id_base = options.block_id_bases.empty() ? 0 : options.block_id_bases[g];
    pool.row_bytes = layout.row_bytes();  // B_row,g (0x02A)
    config.groups.push_back(std::move(pool));
  }
  KVRT_TRY(config.validate());
  return config;
}

Result<SharedBlockPools> SharedBlockPools::create(const CacheLayoutManifest& manifest,
                                                  const SharedBlockPoolsOptions& options) {
  BlockAllocatorConfig config;
  KVRT_TRY_ASSIGN(config, shared_pools_allocator_config(manifest, options));
  // Segments created so far are owned here: an error return destroys them,
  // which removes their names.
  std::vector<BlockPoolSegment> segments;
  std::vector<SegmentInspection> replaced;
  for (const GroupPoolConfig& pool : config.groups) {
    PoolSegmentOptions segment;
    segment.name = PoolSegmentName{options.namespace_name, options.namespace_generation, pool.group, options.instance};
    segment.pool_id = pool.pool;
    segment.pool_generation = pool.pool_generation;
    segment.capacity = PoolCapacity::blocks(pool.capacity_blocks);
    if (options.unnamed_segments) {
      auto made = BlockPoolSegment::create_unnamed(manifest, segment);
      if (!made.ok()) return made.error();
      segments.push_back(std::move(made).value());
      continue;
    }
    auto created = BlockPoolSegment::create_or_replace(manifest, segment);
    if (!created.ok()) return created.error();
    if (created->replaced) replaced.push_back(*created->replaced);
    segments.push_back(std::move(created->segment));
  }
  auto store = ShmPayloadStore::create(std::move(segments));
  if (!store.ok()) return store.error();
  auto owned = std::make_unique<ShmPayloadStore>(std::move(store).value());
  // The pools were made from this config; a difference here is a kvrt bug,
  // reported as the typed error check_config names rather than trusted.
  KVRT_TRY(owned->check_config(config));
  auto allocator = BlockAllocator::create(config, owned.get());
  if (!allocator.ok()) return allocator.error();
  return SharedBlockPools(std::move(owned), std::move(allocator).value(), std::move(config), std::move(replaced));
}

Result<PoolBlockLocation> SharedBlockPools::locate(const PhysicalBlockHandle& handle) const {
  // The allocator checks pool, group, block range and generation (0x05F).
  KVRT_TRY(allocator_.block(handle));
  for (uint32_t g = 0; g < config_.groups.size(); ++g) {
    const GroupPoolConfig& pool = config_.groups[g];
    if (pool.group != handle.group) continue;
    const uint32_t slot = handle.block.value - pool.block_id_base;
    return PoolBlockLocation{g, store_->block_ref(g, slot)};
  }
  return make_error(ErrorCode::unknown_group, "cache group " + std::to_string(handle.group.value) + " has no pool",
                    "handle.group");
}

}  // namespace kvrt::shm
