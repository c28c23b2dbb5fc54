#pragma once
// The immutable state an address read is checked against (spec 0x03A-0x03C):
// one block pool per cache group, whose descriptors resolve physical block
// identities to slots, and per-request, per-group block tables carrying a
// table version. Nothing here mutates; the allocator (Loop 5) publishes
// successor snapshots, this layer only reads them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/address/tensor_geometry.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

// Resolves one physical block identity to its current slot (0x03A: "a later
// descriptor resolves it to a current pool slot").
struct PoolDescriptor {
  PhysicalBlockId physical_id;     // identity, scoped by (pool id, pool generation)
  PoolGeneration pool_generation;  // must equal its pool's current generation
  PhysicalSlot slot;               // position in the pool [blocks], < slot_count
  uint32_t valid_rows = 0;         // committed token rows [rows], <= block size (0x03C)
  // Loop 3 accounting bundle (0x03B: one all-layer 1 MiB block refined into
  // one physical block per group). Optional; when two groups' descriptors at
  // the same logical block both carry one, they must agree.
  std::optional<uint64_t> bundle;

  friend bool operator==(const PoolDescriptor&, const PoolDescriptor&) = default;
};

// The block pool of one cache group, with the byte bases of its K and V
// tensors. Tensor ends are derived: end = base + elements * scalar bytes.
struct GroupPool {
  CacheGroupId group;
  PoolId pool_id;
  PoolGeneration pool_generation;
  uint32_t slot_count = 0;  // provisioned physical blocks [blocks]
  uint64_t k_base = 0;      // byte address of K element 0
  uint64_t v_base = 0;      // byte address of V element 0
  std::vector<PoolDescriptor> descriptors;

  uint64_t base(TensorKind kind) const { return kind == TensorKind::K ? k_base : v_base; }
  const PoolDescriptor* descriptor(PhysicalBlockId id) const;

  friend bool operator==(const GroupPool&, const GroupPool&) = default;
};

// One request's block table for one cache group. The (pool id, pool
// generation) pair is the scope of every entry: the table holds PhysicalRef_g
// = (g, pool_id, pool_generation, p_g) of 0x03A, so a table published before
// its pool was recycled names a stale generation, never a recycled object.
struct GroupTable {
  CacheGroupId group;
  PoolId pool_id;
  PoolGeneration pool_generation;
  std::vector<PhysicalBlockId> blocks;  // logical block j -> physical identity

  friend bool operator==(const GroupTable&, const GroupTable&) = default;
};

// A request snapshot at one table version (0x03B: one table per cache group).
// context_length is the request-visible token count; it is deliberately
// independent of the descriptors' valid rows (0x03G).
struct RequestTables {
  RequestId request_id;
  std::string name;
  uint64_t context_length = 0;  // visible tokens [tokens]
  TableVersion table_version;
  std::vector<GroupTable> tables;

  const GroupTable* table(CacheGroupId group) const;

  friend bool operator==(const RequestTables&, const RequestTables&) = default;
};

// Layout + pools + published request snapshots. Several versions of one
// request may be present (a predecessor and its published successors, 0x03H);
// a read always targets the highest published version.
struct TranslationSnapshot {
  CacheLayoutManifest layout;
  std::vector<GroupPool> pools;
  std::vector<RequestTables> requests;

  // P_g of every group [tokens / block]. The manifest declares one allocator
  // block size for all groups (0x03B: a fixture choice); a runtime with
  // group-specific block sizes would carry one per pool.
  uint32_t block_size() const { return layout.allocator_block_size; }
  const GroupPool* pool(CacheGroupId group) const;
  // The highest published table version of the named request, or nullptr.
  const RequestTables* current(std::string_view name) const;
  // Geometry of a group's K/V tensors under its pool (validated snapshots only).
  TensorGeometry geometry(const CacheGroupLayout& group, const GroupPool& pool) const;
  // [base, end) of one tensor [byte addresses].
  uint64_t tensor_end(const CacheGroupLayout& group, const GroupPool& pool, TensorKind kind) const;

  // Structural invariants, re-derived from scratch (docs/conventions.md habit 2):
  //  - the layout validates (layer gaps, duplicate axes, P_k | P_a);
  //  - exactly one pool per layout group; distinct pool ids; slot_count > 0;
  //  - every descriptor carries its pool's generation (stale_physical), a slot
  //    inside the pool (coordinate_out_of_range) that no other descriptor uses
  //    (slot_reuse), a unique identity, and valid_rows <= P (row_not_valid);
  //  - every K and V tensor fits in 64-bit addresses and no two of them, across
  //    all groups, overlap (overlapping_tensors);
  //  - each request version has one table per group (unknown_group), equal
  //    table lengths across groups (table_length_drift: all groups share P),
  //    one id per name, and no table version published twice
  //    (stale_table_version: a successor must advance the version, 0x03H);
  //  - descriptors of one logical block agree on their bundle (bundle_mismatch).
  // Table entries are NOT required to resolve, nor tables to cover the whole
  // context: an unknown or stale identity, or a missing logical block, is a
  // state the translator must refuse at the read that would consume it, in
  // the 0x03I order; the tests build such snapshots on purpose.
  // Field paths use the TOML key names, so a loader can point at the line.
  Status validate() const;
};

}  // namespace kvrt
