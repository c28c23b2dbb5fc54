#pragma once
// ExecutableReuseReceipt (spec 0x0CD): the end of one reuse attempt. It binds
// the evidence tuple
//     E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)
// to the leases and the frozen execution snapshot. It exists only when the use
// gate G_auth & G_compat & G_version & G_lease & G_map & G_snapshot held; an
// index match without it is not an executable hit.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/physical_block_handle.hpp"
#include "services/common/receipt_ids.hpp"
#include "services/common/token_interval.hpp"

namespace kvrt {

// Which owner proposed the candidate.
enum class ReuseSource : uint8_t {
  prefix_index = 0,   // hash-chain full/partial blocks (0x07)
  radix_index = 1,    // radix tree path (0x08)
  prompt_module = 2,  // declared module (0x0CB)
  session = 3,        // inactive session history (0x0CC)
};
inline constexpr uint8_t kReuseSourceMax = 3;

// g_pool for one pool: require_all_pool_generations (0x0CD).
struct PoolGenerationRef {
  PoolId pool;
  PoolGeneration generation;

  friend bool operator==(const PoolGenerationRef&, const PoolGenerationRef&) = default;
};

struct ExecutableReuseReceipt {
  RequestId request_id;
  RequestGeneration request_generation;
  ReuseSource source = ReuseSource::prefix_index;
  std::string namespace_id;                             // authorized cache namespace
  NamespaceGeneration namespace_generation;             // g_ns
  Sha256Digest semantic_digest;                         // d_sem: compatibility manifest digest
  Sha256Digest layout_digest;                           // d_layout: layout manifest digest
  uint64_t index_version = 0;                           // v_index: prefix-index publication version
  TreeVersion tree_version;                             // v_tree: radix-tree version (0 if not radix)
  std::vector<PoolGenerationRef> pool_generations;      // g_pool of every pool dereferenced
  TokenInterval covered_interval;                       // rows reused [tokens]
  std::vector<PhysicalBlockHandle> physical_handles;    // path_and_physical_refs: blocks read
  std::vector<RadixNodeId> path_node_ids;               // radix path nodes leased (empty otherwise)
  std::vector<LeaseId> leases;                          // leases covering every handle and path node
  bool collision_witness_verified = false;              // step 3: witness checked where policy requires it
  uint32_t required_frontier_tokens = 0;                // f_required: rows the kernel dereferences [tokens]
  uint32_t ready_frontier_tokens = 0;                   // f_ready (f_map): rows mapped and ready [tokens];
                                                        // L_map = max(0, required - ready) must be 0 (0x0CF)
  ExecutionSnapshotVersion execution_snapshot_version;  // v_exec
  std::string kernel_abi_id;                            // kernel ABI frozen with the snapshot (step 8)

  friend bool operator==(const ExecutableReuseReceipt&, const ExecutableReuseReceipt&) = default;
};

}  // namespace kvrt
