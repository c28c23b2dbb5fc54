#pragma once
// Strong identifiers that appear only in receipts so far (STYLE.md habit 3).
// They follow services/common/ids.hpp; when an owner adopts one in its own
// state it may move it there unchanged (same tag, same representation), and
// the wire schema stays the same.
#include "services/common/ids.hpp"

namespace kvrt {

// One allocator transaction (0x04D transaction_id); unique per allocator.
using TransactionId = StrongId<struct TransactionIdTag, uint64_t>;
// A read/write lease or radix lock lease (0x04B active leases, 0x08G lock_lease_id).
using LeaseId = StrongId<struct LeaseIdTag, uint64_t>;
// Bit 63 of a LeaseId marks a radix path lease, issued by the node's radix
// index owner (0x0CD step 4); the allocator's lease ids never set it, so a
// lease names its owner by itself.
inline constexpr uint64_t kPathLeaseBit = uint64_t{1} << 63;
inline bool is_path_lease(LeaseId l) { return (l.value & kPathLeaseBit) != 0; }
// A published snapshot of the prefix index (0x07G index_snapshot_id).
using IndexSnapshotId = StrongId<struct IndexSnapshotIdTag, uint64_t>;
// Version of the radix tree after a committed mutation (0x08F, 0x08G tree_version).
using TreeVersion = StrongId<struct TreeVersionTag, uint64_t>;
// A node of the radix tree (0x08G path_node_ids, terminal_node_id); the root is 0.
using RadixNodeId = StrongId<struct RadixNodeIdTag, uint64_t>;
// A token slot of a page-size-1 K/V pool (0x08A kv_slot_ids): one token's rows.
using TokenSlotId = StrongId<struct TokenSlotIdTag, uint64_t>;
// A request slot of the mapper's virtual tensors (0x06B, vAttention batch index).
using RequestSlot = StrongId<struct RequestSlotTag>;
// Incremented each time a request slot is bound to a new request (0x06B, 0x06E).
using SlotGeneration = StrongId<struct SlotGenerationTag, uint64_t>;
// A physical page handle of G bytes created by the mapper (0x06A N_handle).
using PageHandleId = StrongId<struct PageHandleIdTag, uint64_t>;
// Version of a frozen execution snapshot (0x0BB, 0x0CD v_exec).
using ExecutionSnapshotVersion = StrongId<struct ExecutionSnapshotVersionTag, uint64_t>;

}  // namespace kvrt
