#pragma once
// AllocationTxn and AllocationReceipt (spec 0x04D): the intent of one allocator
// transaction and the immutable physical fact it produced. The receipt records
// physical fact, not policy intent: M5.2 may read the outcome and the capacity
// figures, it never turns intent into ownership by declaration (0x00C).
//
// Field lists follow the 0x04D dataclasses; the additions (operation, request
// versions after the transaction, published table entries, evicted handles,
// append path) are the facts issue 3 asks every receipt to carry so that a
// consumer can act on a receipt without re-reading allocator state.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/state_digest.hpp"
#include "services/common/physical_block_handle.hpp"
#include "services/common/receipt_ids.hpp"

namespace kvrt {

// The allocator operation set (0x04C; its table was lost from the spec and is
// rebuilt here from 0x04E, 0x05C-0x05E and issue 3). Numeric values travel in
// schema/allocator.capnp; never renumber.
enum class AllocationOperation : uint8_t {
  allocate = 0,           // prompt rows; prefix-hit handles are taken by reference
  append = 1,             // one decode row; the allocator picks one of the three 0x04E paths
  fork = 2,               // parallel sampling / beam: every mapped handle gains a reference
  copy_on_write = 3,      // explicit COW of a shared tail (0x05C nine-step order)
  truncate = 4,           // suffix only; an interior block is rejected (0x05E)
  cancel = 5,             // same reference mechanics as release, different reason (0x05E)
  release = 6,            // drop the request's strong references; cached blocks turn EVICTABLE
  touch = 7,              // revive a zero-ref cached block into a request map
  evict = 8,              // drop a weak cached identity; never revokes a live mapping
  publish_cache_key = 9,  // attach a prefix-index key to a full block (weak identity, 0x04B)
  commit_rows = 10,       // publish rows the caller wrote at a receipt's slot (valid-row frontier)
};
inline constexpr uint8_t kAllocationOperationMax = 10;

// Phase of a transaction (0x04A). RESERVED, COPYING and READY_TO_PUBLISH are
// transaction phases, never committed ownership states: an unpublished block
// is never reachable from a request map.
enum class TransactionPhase : uint8_t {
  validated = 0,         // expected versions checked (0x05C step 1), nothing reserved yet
  reserved = 1,          // destinations reserved as unpublished (step 3)
  copying = 2,           // source leases held, rows being copied (steps 4-6)
  ready_to_publish = 3,  // destination frontiers validated (step 7)
  published = 4,         // successor published atomically (step 8, linearization point)
  rolled_back = 5,       // failed before publication; predecessor digest restored (0x04F)
};
inline constexpr uint8_t kTransactionPhaseMax = 5;

struct AllocationTxn {
  TransactionId transaction_id;
  Epoch expected_allocator_epoch;                 // the transaction fails unless the allocator is at this epoch
  RequestId request_id;                           // the request whose tables change (fork: the parent)
  RequestGeneration expected_request_generation;  // fences a recycled request id
  TableVersion expected_table_version;            // fences a stale block-table view
  AllocationOperation operation = AllocationOperation::allocate;
  RequestId fork_child;                               // fork only: the new request's id; 0 otherwise
  uint32_t requested_rows = 0;                        // allocate: prompt rows; append: rows appended (1);
                                                      // truncate: context length kept [tokens]; 0 otherwise
  std::vector<PhysicalBlockHandle> touched_handles;   // existing handles read or re-referenced
  std::vector<PhysicalBlockHandle> reserved_handles;  // new destinations, unpublished until step 8
  TransactionPhase publication_state = TransactionPhase::validated;

  friend bool operator==(const AllocationTxn&, const AllocationTxn&) = default;
};

// Which of the three append paths of 0x04E the allocator took.
enum class AppendPath : uint8_t {
  not_append = 0,     // the operation was not an append
  new_bundle = 1,     // offset 0: reserve a new bundle, write row 0
  private_tail = 2,   // offset > 0, unique owner: write row o, publish valid_rows = o + 1
  copy_on_write = 3,  // offset > 0, shared tail: COW the bundle, then append
};
inline constexpr uint8_t kAppendPathMax = 3;

// How the transaction ended. A stale epoch, generation or table version is a
// caller error and answers a typed Error instead of a receipt (STYLE.md habit 4);
// running out of capacity is a normal outcome.
enum class AllocationOutcome : uint8_t {
  committed = 0,        // successor published; successor_digest is the new state
  rolled_back = 1,      // failed before publication; successor_digest == predecessor_digest
  out_of_capacity = 2,  // no free or evictable block; nothing changed
};
inline constexpr uint8_t kAllocationOutcomeMax = 2;

// One handle's strong reference count before and after the transaction
// (0x05B: "old tail refs: 2 -> 1"). Counts are committed request-map
// references plus active leases (0x04B) [references].
struct RefcountDelta {
  PhysicalBlockHandle handle;
  uint32_t refs_before = 0;  // [references]
  uint32_t refs_after = 0;   // [references]

  int64_t delta() const { return int64_t{refs_after} - int64_t{refs_before}; }
  friend bool operator==(const RefcountDelta&, const RefcountDelta&) = default;
};

// One block-table entry of the published successor (0x05B "published D tail:
// g0=1003@12, g1=2003@6, rows=3"). The handle names its cache group.
struct TableEntryUpdate {
  uint32_t logical_block = 0;  // index j in the request's group table [blocks]
  PhysicalBlockHandle handle;
  uint32_t valid_rows = 0;  // valid-row frontier of the block after publication [rows]

  friend bool operator==(const TableEntryUpdate&, const TableEntryUpdate&) = default;
};

struct AllocationReceipt {
  TransactionId transaction_id;
  AllocationOperation operation = AllocationOperation::allocate;
  RequestId request_id;                              // request whose tables changed (fork: the child)
  RequestGeneration request_generation;              // the request's generation after the transaction
  TableVersion table_version_after;                  // 0x05B: D successor table_version = 2
  uint32_t context_tokens_after = 0;                 // logical length after the transaction [tokens]
  StateDigest predecessor_digest;                    // committed allocator state before (0x04F); the
                                                     // incremental multiset digest of issue 3
  StateDigest successor_digest;                      // committed allocator state after
  uint32_t useful_new_rows = 0;                      // K/V rows the request gains [rows]
  uint32_t new_physical_blocks = 0;                  // blocks taken from pools, one per cache group
                                                     // per bundle [blocks]
  uint32_t copied_rows = 0;                          // token rows copied by COW, each spanning every
                                                     // group [rows] (0x05A r)
  uint64_t copy_payload_bytes = 0;                   // copied_rows * sum_g B_row,g [bytes] (0x05A)
  std::vector<RefcountDelta> refcount_deltas;        // every handle whose count changed
  std::vector<TableEntryUpdate> published_entries;   // successor table entries written
  std::vector<PhysicalBlockHandle> evicted_handles;  // cached identities evicted to serve this txn
  Epoch allocator_epoch_after;                       // 0x05B: 43 -> 44; unchanged unless committed
  AppendPath append_path = AppendPath::not_append;
  AllocationOutcome outcome = AllocationOutcome::committed;
  std::string rollback_reason;  // the step or fault point that failed; empty
                                // unless outcome == rolled_back

  friend bool operator==(const AllocationReceipt&, const AllocationReceipt&) = default;
};

}  // namespace kvrt
