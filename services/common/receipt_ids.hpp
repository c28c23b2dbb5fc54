#pragma once
// Strong identifiers that appear only in receipts so far (docs/conventions.md habit 3).
// They follow services/common/ids.hpp; when an owner adopts one in its own
// state it may move it there unchanged (same tag, same representation), and
// the wire schema stays the same.
#include <cstdint>

#include "services/common/ids.hpp"

namespace kvrt {

// One allocator transaction (0x04D transaction_id); unique per allocator.
using TransactionId = StrongId<struct TransactionIdTag, uint64_t>;
// A read/write lease or radix lock lease (0x04B active leases, 0x08G lock_lease_id).
using LeaseId = StrongId<struct LeaseIdTag, uint64_t>;

// Who issued a lease, and so who releases it. The allocator's block leases
// and the radix index's path leases (0x0CD step 4) travel in one list of
// LeaseIds, so the id itself names its owner.
enum class LeaseOwner : uint8_t { allocator = 0, radix_index = 1 };

// The one encoding of a LeaseId's owner and parts: bit 63 is the owner; an
// allocator lease is its lease-table slot in the low word and the slot's
// generation (31 bits) above it; a path lease is a 63-bit serial.
class OwnerLeaseId {
 public:
  static constexpr uint32_t kMaxGeneration = 0x7FFFFFFFu;
  static constexpr OwnerLeaseId allocator_lease(uint32_t slot, uint32_t generation) {
    return OwnerLeaseId{LeaseId{(uint64_t{generation & kMaxGeneration} << 32) | slot}};
  }
  static constexpr OwnerLeaseId path_lease(uint64_t serial) {
    return OwnerLeaseId{LeaseId{kOwnerBit | (serial & ~kOwnerBit)}};
  }
  static constexpr OwnerLeaseId of(LeaseId id) { return OwnerLeaseId{id}; }

  constexpr LeaseId id() const { return id_; }
  constexpr LeaseOwner owner() const {
    return (id_.value & kOwnerBit) != 0 ? LeaseOwner::radix_index : LeaseOwner::allocator;
  }
  constexpr uint32_t slot() const { return static_cast<uint32_t>(id_.value & 0xFFFFFFFFu); }  // allocator
  constexpr uint32_t generation() const { return static_cast<uint32_t>(id_.value >> 32); }    // allocator
  constexpr uint64_t serial() const { return id_.value & ~kOwnerBit; }                        // radix index

 private:
  static constexpr uint64_t kOwnerBit = uint64_t{1} << 63;
  constexpr explicit OwnerLeaseId(LeaseId id) : id_(id) {}
  LeaseId id_;
};
inline constexpr LeaseOwner lease_owner(LeaseId id) { return OwnerLeaseId::of(id).owner(); }
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
