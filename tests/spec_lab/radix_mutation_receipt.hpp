#pragma once
// RadixMutationReceipt: the immutable record of one committed radix-index
// transaction (spec 0x08C "return RadixMutationReceipt(predecessor,
// committed_tree_version())", 0x08F "every operation hashes its predecessor
// and successor states"). It is kvrt's normative protocol, not SGLang's
// (0x08H). A match that splits an edge is a structural mutation and gets one
// too (0x08B): `splits` names the new shared node and the old remainder; no
// slot appears in any slot list because of a split.
//
// Units: token counts [tokens]; slot lists name K/V token slots.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/state_digest.hpp"
#include "services/radix/radix_tree.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

enum class RadixMutationKind : uint8_t {
  probe,               // match without a lock
  acquire,             // match, then lock the matched path under a request lease
  handoff,             // match, lock under a handoff lease, RadixHandoffLabReceipt (0x08G)
  admit_handoff,       // exchange a handoff lease for a request lease
  publish_finished,    // insert, release duplicates, drop the request's lease (0x08C path 1)
  publish_unfinished,  // insert, release duplicates, move the request's lease (0x08C path 2)
  release,             // drop a lease
  reserve,             // free -> request-private slots
  release_private,     // request-private -> free slots
  evict,               // evict(target) (0x08E)
  evict_leaf,          // one named leaf (purge)
};
std::string_view to_string(RadixMutationKind kind);

struct RadixMutationReceipt {
  RadixMutationKind kind = RadixMutationKind::probe;
  RequestId request_id;  // 0 for evictions
  RequestGeneration request_generation;
  TreeVersion version_before;  // predecessor
  TreeVersion version_after;   // committed successor = version_before + 1
  StateDigest state_before;
  StateDigest state_after;

  // Match facts (probe, acquire, handoff, publish_unfinished's re-match).
  uint32_t matched_tokens = 0;
  RadixNodeId terminal_node;
  std::vector<TokenSlotId> prefix_slots;  // S(terminal), one per matched token
  std::vector<RadixSplit> splits;         // structural mutations of this op

  // Publication facts (0x08C).
  uint32_t protected_len = 0;                         // tokens the request already referenced through its lease
  uint32_t prefix_len = 0;                            // tokens the tree already held
  std::vector<RadixNodeId> created_nodes;             // new leaves
  std::vector<TokenSlotId> duplicate_slots_released;  // S_in[protected_len:prefix_len] -> free
  std::vector<TokenSlotId> published_slots;           // S_in[prefix_len:] -> tree-owned
  std::vector<TokenSlotId> reserved_slots;            // free -> private (reserve, claimed append slots)
  std::vector<TokenSlotId> released_private_slots;    // private -> free (release_private)

  // Lock facts (0x08D): the lease touched and the node its lock sat on.
  std::optional<LeaseId> lease;           // acquired, moved or released
  std::optional<LeaseId> exchanged_from;  // admit_handoff: the retired handoff lease
  RadixNodeId lease_terminal_before;      // 0 when the lease is new
  RadixNodeId lease_terminal_after;       // 0 when the lease ended
  int64_t evictable_delta = 0;            // change of evictable tokens by lock moves

  // Eviction facts (0x08E).
  std::vector<RadixNodeId> evicted_nodes;  // in eviction order
  std::vector<TokenSlotId> evicted_slots;  // returned to the free queue
};

}  // namespace kvrt
