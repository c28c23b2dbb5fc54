#pragma once
// Fixtures for the [shm] suites: the shipped layouts and pool options with an
// instance id unique to this run, so parallel runs and CI never share a name.
#include <catch2/catch.hpp>
#include <string>

#include "services/identity/layout_loader.hpp"
#include "shm/block_pool_segment.hpp"

namespace kvrt::shm::test {

inline CacheLayoutManifest shipped_layout(const char* file) {
  auto m = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/" + file);
  REQUIRE(m.ok());
  return *m;
}

inline CacheLayoutManifest two_group_layout() { return shipped_layout("two-group-tp2.toml"); }

// Pool `pool` of `group` in namespace "shm-test", a fresh instance per call.
inline PoolSegmentOptions pool_options(uint32_t group, uint32_t blocks, uint32_t generation = 1, uint32_t pool = 7) {
  PoolSegmentOptions o;
  o.name = PoolSegmentName{"shm-test", NamespaceGeneration{3}, CacheGroupId{group}, make_instance_id()};
  o.pool_id = PoolId{pool};
  o.pool_generation = PoolGeneration{generation};
  o.capacity = PoolCapacity::blocks(blocks);
  return o;
}

inline std::string segment_name(const PoolSegmentOptions& o) {
  auto n = pool_segment_name(o.name);
  REQUIRE(n.ok());
  return *n;
}

// True while a segment of that name exists, kvrt's or not (inspect answers
// io only once the name is gone).
inline bool segment_exists(const std::string& name) {
  auto found = BlockPoolSegment::inspect(name);
  return found.ok() || found.error().code != ErrorCode::io;
}

}  // namespace kvrt::shm::test
