#pragma once
// The allocator owner's wire operations (issue 5): owning value types of the
// BlockAllocator calls a worker may make, batched so that one scheduler
// iteration costs one message and one receipt (issue 5, "Batching").
//
// A batch is applied in order; each operation is answered by exactly one
// outcome at the same index. Operations are independent: one that fails
// answers a typed Error and leaves the allocator as it was (0x04F), and the
// batch goes on with the next (a scheduler iteration's appends for different
// requests must not fail together).
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "services/allocator/block_allocator.hpp"
#include "services/common/error.hpp"
#include "services/common/trace_context.hpp"
#include "services/allocator/allocation_receipt.hpp"
#include "services/allocator/release_result.hpp"

namespace kvrt {

struct AllocateOp {
  uint32_t prompt_rows = 0;                     // logical rows of the new request [tokens]
  std::vector<PhysicalBlockHandle> prefix_hit;  // bundle-major, as AllocateArgs
  std::optional<Epoch> expected_epoch;
  friend bool operator==(const AllocateOp&, const AllocateOp&) = default;
};

struct AppendOp {
  RequestFence fence;
  // Rows of the appended token per cache group (B_row,g bytes each), or empty:
  // the worker writes the rows into the pool at the receipt's slot itself and
  // publishes them with CommitRowsOp (the shared-memory path).
  std::vector<std::vector<uint8_t>> rows;
  std::optional<Epoch> expected_epoch;
  friend bool operator==(const AppendOp&, const AppendOp&) = default;
};

struct CommitRowsOp {
  RequestFence fence;
  uint32_t valid_through = 0;  // rows [0, valid_through) are written [tokens]
  friend bool operator==(const CommitRowsOp&, const CommitRowsOp&) = default;
};

struct ForkOp {
  RequestFence parent;
  friend bool operator==(const ForkOp&, const ForkOp&) = default;
};

struct TruncateOp {
  RequestFence fence;
  uint32_t from_token = 0;  // first removed position [tokens]
  uint32_t to_token = 0;    // one past the last removed position (the context) [tokens]
  friend bool operator==(const TruncateOp&, const TruncateOp&) = default;
};

struct ReleaseOp {
  RequestFence fence;
  ReleaseReason reason = ReleaseReason::finished;
  friend bool operator==(const ReleaseOp&, const ReleaseOp&) = default;
};

struct TouchOp {
  RequestFence fence;
  std::vector<PhysicalBlockHandle> bundles;  // bundle-major
  friend bool operator==(const TouchOp&, const TouchOp&) = default;
};

struct AcquireLeaseOp {
  PhysicalBlockHandle handle;
  friend bool operator==(const AcquireLeaseOp&, const AcquireLeaseOp&) = default;
};

struct ReleaseLeaseOp {
  LeaseId lease;
  friend bool operator==(const ReleaseLeaseOp&, const ReleaseLeaseOp&) = default;
};

// Reads one request's block tables (the worker's view after a receipt it
// lost, or a publisher's check). Answered by a BlockTableView.
struct ReadTableOp {
  RequestId request;
  friend bool operator==(const ReadTableOp&, const ReadTableOp&) = default;
};

using AllocatorOp = std::variant<AllocateOp, AppendOp, CommitRowsOp, ForkOp, TruncateOp, ReleaseOp, TouchOp,
                                 AcquireLeaseOp, ReleaseLeaseOp, ReadTableOp>;

// A granted lease (0x04B): a temporary strong reference on one block.
struct LeaseReceipt {
  LeaseId lease;
  PhysicalBlockHandle handle;
  uint32_t refs_after = 0;  // the block's strong references with the lease [references]
  friend bool operator==(const LeaseReceipt&, const LeaseReceipt&) = default;
};

// The answer to ReleaseLeaseOp.
struct LeaseReleaseReceipt {
  LeaseId lease;
  PhysicalBlockHandle handle;
  uint32_t refs_after = 0;  // [references]
  friend bool operator==(const LeaseReleaseReceipt&, const LeaseReleaseReceipt&) = default;
};

// One block of a request table with its committed facts.
struct BlockTableEntry {
  PhysicalBlockHandle handle;
  uint32_t valid_rows = 0;  // [rows]
  uint64_t cache_key = 0;   // weak identity; 0 = none
  friend bool operator==(const BlockTableEntry&, const BlockTableEntry&) = default;
};

struct BlockTableView {
  RequestFence fence;           // the versions the view was read at
  uint32_t context_tokens = 0;  // [tokens]
  Epoch allocator_epoch;
  std::vector<std::vector<BlockTableEntry>> groups;  // [group][logical block]
  friend bool operator==(const BlockTableView&, const BlockTableView&) = default;
};

using AllocatorOutcome =
    std::variant<Error, AllocationReceipt, ReleaseResult, LeaseReceipt, LeaseReleaseReceipt, BlockTableView>;

struct AllocatorBatch {
  TraceContext trace;
  std::vector<AllocatorOp> ops;
  friend bool operator==(const AllocatorBatch&, const AllocatorBatch&) = default;
};

struct AllocatorBatchReceipt {
  TraceContext trace;
  std::vector<AllocatorOutcome> outcomes;  // outcomes[i] answers ops[i]
  friend bool operator==(const AllocatorBatchReceipt&, const AllocatorBatchReceipt&) = default;
};

}  // namespace kvrt
