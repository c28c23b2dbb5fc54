@0xfb95289c1bcd368d;
# Allocator transactions and their receipts (spec 0x04D, 0x05B-0x05F, issue 3).
# Mirrors services/allocator/allocation_receipt.hpp and release_result.hpp; enum
# ordinals equal the C++ enum values (the codec static_asserts it).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Common = import "common.capnp";

# The allocator operation set (0x04C table rebuilt from 0x04E, 0x05C-0x05E).
enum AllocationOperation {
  allocate @0;         # prompt rows; prefix-hit handles taken by reference
  append @1;           # one decode row; one of the three 0x04E paths
  fork @2;             # parallel sampling / beam
  copyOnWrite @3;      # explicit COW of a shared tail (0x05C)
  truncate @4;         # suffix only (0x05E)
  cancel @5;
  release @6;
  touch @7;            # revive a zero-ref cached block
  evict @8;            # drop a weak cached identity
  publishCacheKey @9;  # attach a prefix-index key to a full block
  commitRows @10;      # publish rows the caller wrote at a receipt's slot
}

# Transaction phases (0x04A); never committed ownership states.
enum TransactionPhase {
  validated @0;       # 0x05C step 1 done
  reserved @1;        # step 3
  copying @2;         # steps 4-6
  readyToPublish @3;  # step 7
  published @4;       # step 8, linearization point
  rolledBack @5;      # restored the exact predecessor digest (0x04F)
}

# AllocationTxn (spec 0x04D).
struct AllocationTxn {
  transactionId @0 :UInt64;              # TransactionId
  expectedAllocatorEpoch @1 :UInt64;     # Epoch
  requestId @2 :UInt64;                  # RequestId (fork: the parent)
  expectedRequestGeneration @3 :UInt32;  # RequestGeneration
  expectedTableVersion @4 :UInt64;       # TableVersion
  operation @5 :AllocationOperation;
  forkChild @6 :UInt64;                  # RequestId of the fork child; 0 unless fork
  requestedRows @7 :UInt32;              # allocate: prompt rows; append: rows [rows];
                                         # truncate: context kept [tokens]
  touchedHandles @8 :List(Common.PhysicalBlockHandle);
  reservedHandles @9 :List(Common.PhysicalBlockHandle);  # unpublished until step 8
  publicationState @10 :TransactionPhase;
}

# The three append paths of 0x04E.
enum AppendPath {
  notAppend @0;
  newBundle @1;     # offset 0
  privateTail @2;   # offset > 0, unique owner
  copyOnWrite @3;   # offset > 0, shared tail
}

enum AllocationOutcome {
  committed @0;       # successor published
  rolledBack @1;      # successor digest == predecessor digest
  outOfCapacity @2;   # nothing free or evictable; nothing changed
}

# Reference count of one handle before and after (0x05B "refs 2 -> 1").
struct RefcountDelta {
  handle @0 :Common.PhysicalBlockHandle;
  refsBefore @1 :UInt32;   # request-map references + active leases [references]
  refsAfter @2 :UInt32;    # [references]
}

# One published successor block-table entry.
struct TableEntryUpdate {
  logicalBlock @0 :UInt32;   # j in the request's group table [blocks]
  handle @1 :Common.PhysicalBlockHandle;
  validRows @2 :UInt32;      # valid-row frontier after publication [rows]
}

# AllocationReceipt (spec 0x04D plus issue 3's facts).
struct AllocationReceipt {
  transactionId @0 :UInt64;          # TransactionId
  operation @1 :AllocationOperation;
  requestId @2 :UInt64;              # RequestId (fork: the child)
  requestGeneration @3 :UInt32;      # RequestGeneration after the transaction
  tableVersionAfter @4 :UInt64;      # TableVersion
  contextTokensAfter @5 :UInt32;     # logical length after [tokens]
  predecessorDigest @6 :Common.StateDigest;  # allocator state before
  successorDigest @7 :Common.StateDigest;    # allocator state after
  usefulNewRows @8 :UInt32;          # [rows]
  newPhysicalBlocks @9 :UInt32;      # one per cache group per bundle [blocks]
  copiedRows @10 :UInt32;            # token rows copied, each spanning every group [rows]
  copyPayloadBytes @11 :UInt64;      # copiedRows * sum_g B_row,g [bytes]
  refcountDeltas @12 :List(RefcountDelta);
  publishedEntries @13 :List(TableEntryUpdate);
  evictedHandles @14 :List(Common.PhysicalBlockHandle);
  allocatorEpochAfter @15 :UInt64;   # Epoch
  appendPath @16 :AppendPath;
  outcome @17 :AllocationOutcome;
  rollbackReason @18 :Text;          # failing step or fault point; empty unless rolledBack
}

# Why references were dropped (0x05E: same mechanics, different receipts).
enum ReleaseReason {
  finished @0;
  cancelled @1;
  truncated @2;
  preempted @3;
}

# ReleaseResult (spec 0x00C, 0x05E).
struct ReleaseResult {
  transactionId @0 :UInt64;          # TransactionId
  requestId @1 :UInt64;              # RequestId
  requestGeneration @2 :UInt32;      # generation whose references were dropped
  reason @3 :ReleaseReason;
  predecessorDigest @4 :Common.StateDigest;
  successorDigest @5 :Common.StateDigest;
  contextTokensBefore @6 :UInt32;    # [tokens]
  contextTokensAfter @7 :UInt32;     # [tokens]; 0 unless truncated
  tableVersionAfter @8 :UInt64;      # TableVersion
  refcountDeltas @9 :List(RefcountDelta);
  freedHandles @10 :List(Common.PhysicalBlockHandle);      # now FREE
  evictableHandles @11 :List(Common.PhysicalBlockHandle);  # now EVICTABLE (cached, zero refs)
  allocatorEpochAfter @12 :UInt64;   # Epoch
}
