#pragma once
// Physical identities of K/V blocks.
//
// PhysicalBlockHandle (0x04B, 0x05F) is what the allocator hands out and counts
// references on: the generation fences ABA reuse of a block id (1003@12 vs
// 1003@13 in 0x05F), so a stale handle is a reported caller error, never a
// silent alias of the block's next owner.
//
// PhysicalRef (0x03A) is what a block table or a reuse receipt names: it is
// scoped by the pool and the pool's generation, so a block id from a replaced
// pool (new segment, new namespace generation) can never resolve.
#include "services/common/ids.hpp"

namespace kvrt {

struct PhysicalBlockHandle {
  PoolId pool;                 // pool that owns the block (one pool per cache group, issue 3)
  CacheGroupId group;          // cache group: which layers and representation (0x03B)
  PhysicalBlockId block;       // block identity inside the pool [block id, not a slot]
  BlockGeneration generation;  // advanced every time the block is recycled (0x05E, 0x05F)

  friend bool operator==(const PhysicalBlockHandle&, const PhysicalBlockHandle&) = default;
};

struct PhysicalRef {
  CacheGroupId group;              // g of PhysicalRef_g (0x03A)
  PoolId pool_id;                  // pool_id_g
  PoolGeneration pool_generation;  // pool_generation_g: a replaced pool never matches
  PhysicalBlockId block;           // p_g: physical_block_id [block id]

  friend bool operator==(const PhysicalRef&, const PhysicalRef&) = default;
};

}  // namespace kvrt
