@0xfb95289c1bcd368d;
# The allocator owner's messages (services/allocator/): its transactions and
# their receipts (spec 0x04D, 0x05B-0x05F), and the batched operations a
# worker sends it with the batch receipt the owner answers.
#
# A receipt records physical fact, not policy intent: M5.2 may read the
# outcome and the capacity figures, it never turns intent into ownership by
# declaration (0x00C). Enumerant values travel on the wire; never renumber.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
$Kvrt.include(["services/common/receipt_ids.hpp"]);

enum AllocationOperation {
  # The allocator operation set (0x04C; its table was lost from the spec and is
  # rebuilt from 0x04E and 0x05C-0x05E).
  allocate @0;         # prompt rows; prefix-hit handles are taken by reference
  append @1;           # one decode row; the allocator picks one of the three 0x04E paths
  fork @2;             # parallel sampling / beam: every mapped handle gains a reference
  copyOnWrite @3;      # explicit COW of a shared tail (0x05C nine-step order)
  truncate @4;         # suffix only; an interior block is rejected (0x05E)
  cancel @5;           # same reference mechanics as release, different reason (0x05E)
  release @6;          # drop the request's strong references; cached blocks turn EVICTABLE
  touch @7;            # revive a zero-ref cached block into a request map
  evict @8;            # drop a weak cached identity; never revokes a live mapping
  publishCacheKey @9;  # attach a prefix-index key to a full block (weak identity, 0x04B)
  commitRows @10;      # publish rows the caller wrote at a receipt's slot (valid-row frontier)
}

enum TransactionPhase {
  # Phase of a transaction (0x04A). RESERVED, COPYING and READY_TO_PUBLISH are
  # transaction phases, never committed ownership states: an unpublished block
  # is never reachable from a request map.
  validated @0;       # expected versions checked (0x05C step 1), nothing reserved yet
  reserved @1;        # destinations reserved as unpublished (step 3)
  copying @2;         # source leases held, rows being copied (steps 4-6)
  readyToPublish @3;  # destination frontiers validated (step 7)
  published @4;       # successor published atomically (step 8, linearization point)
  rolledBack @5;      # failed before publication; predecessor digest restored (0x04F)
}

struct AllocationTxn $Kvrt.message {
  # AllocationTxn (0x04D): the intent of one allocator transaction.
  transactionId @0 :UInt64 $Kvrt.type("TransactionId");
  expectedAllocatorEpoch @1 :UInt64 $Kvrt.type("Epoch");
  # The transaction fails unless the allocator is at this epoch.
  requestId @2 :UInt64 $Kvrt.type("RequestId");                            # whose tables change (fork: the parent)
  expectedRequestGeneration @3 :UInt32 $Kvrt.type("RequestGeneration");    # fences a recycled request id
  expectedTableVersion @4 :UInt64 $Kvrt.type("TableVersion");              # fences a stale block-table view
  operation @5 :AllocationOperation;
  forkChild @6 :UInt64 $Kvrt.type("RequestId");                            # fork only: the new request; 0 otherwise
  requestedRows @7 :UInt32;
  # allocate: prompt rows; append: rows appended (1); truncate: context
  # length kept [tokens]; 0 otherwise.
  touchedHandles @8 :List(Common.PhysicalBlockHandle);                     # existing handles read or re-referenced
  reservedHandles @9 :List(Common.PhysicalBlockHandle);                    # new destinations, unpublished until step 8
  publicationState @10 :TransactionPhase;
}

enum AppendPath {
  # Which of the three append paths of 0x04E the allocator took.
  notAppend @0;     # the operation was not an append
  newBundle @1;     # offset 0: reserve a new bundle, write row 0
  privateTail @2;   # offset > 0, unique owner: write row o, publish valid_rows = o + 1
  copyOnWrite @3;   # offset > 0, shared tail: COW the bundle, then append
}

enum AllocationOutcome {
  # How the transaction ended. A stale epoch, generation or table version is a
  # caller error and answers a typed Error instead of a receipt; running out of
  # capacity is a normal outcome.
  committed @0;       # successor published; successor_digest is the new state
  rolledBack @1;      # failed before publication; successor_digest == predecessor_digest
  outOfCapacity @2;   # no free or evictable block; nothing changed
  quotaExceeded @3;   # the request's namespace or trust domain would hold more
                      # blocks than its quota; nothing changed
}

struct RefcountDelta {
  # One handle's strong reference count before and after the transaction
  # (0x05B: "old tail refs: 2 -> 1"). Counts are committed request-map
  # references plus active leases (0x04B).
  handle @0 :Common.PhysicalBlockHandle;
  refsBefore @1 :UInt32;   # [references]
  refsAfter @2 :UInt32;    # [references]
}

struct TableEntryUpdate {
  # One block-table entry of the published successor (0x05B "published D tail:
  # g0=1003@12, g1=2003@6, rows=3"). The handle names its cache group.
  logicalBlock @0 :UInt32;   # index j in the request's group table [blocks]
  handle @1 :Common.PhysicalBlockHandle;
  validRows @2 :UInt32;      # valid-row frontier of the block after publication [rows]
}

struct AllocationReceipt $Kvrt.message {
  # AllocationReceipt (0x04D): the immutable physical fact one transaction
  # produced. The fields beyond 0x04D's dataclass (operation, request versions
  # after, published entries, evicted handles, append path) let a consumer act
  # on a receipt without re-reading allocator state.
  transactionId @0 :UInt64 $Kvrt.type("TransactionId");
  operation @1 :AllocationOperation;
  requestId @2 :UInt64 $Kvrt.type("RequestId");                     # whose tables changed (fork: the child)
  requestGeneration @3 :UInt32 $Kvrt.type("RequestGeneration");     # the request's generation after
  tableVersionAfter @4 :UInt64 $Kvrt.type("TableVersion");          # 0x05B: D successor table_version = 2
  contextTokensAfter @5 :UInt32;                                    # logical length after [tokens]
  predecessorDigest @6 :Common.StateDigest;                         # committed allocator state before (0x04F)
  successorDigest @7 :Common.StateDigest;                           # committed allocator state after
  usefulNewRows @8 :UInt32;                                         # K/V rows the request gains [rows]
  newPhysicalBlocks @9 :UInt32;      # blocks taken from pools, one per cache group per bundle [blocks]
  copiedRows @10 :UInt32;            # token rows copied by COW, each spanning every group [rows] (0x05A r)
  copyPayloadBytes @11 :UInt64;      # copied_rows * sum_g B_row,g [bytes] (0x05A)
  refcountDeltas @12 :List(RefcountDelta);                          # every handle whose count changed
  publishedEntries @13 :List(TableEntryUpdate);                     # successor table entries written
  evictedHandles @14 :List(Common.PhysicalBlockHandle);             # cached identities evicted to serve this
  allocatorEpochAfter @15 :UInt64 $Kvrt.type("Epoch");              # 0x05B: 43 -> 44; unchanged unless committed
  appendPath @16 :AppendPath;
  outcome @17 :AllocationOutcome;
  rollbackReason @18 :Text;
  # Why nothing changed: the step or fault point that failed (rolled_back),
  # the shortage (out_of_capacity), or the quota that refused and what its
  # owner holds (quota_exceeded); empty when committed.
}

enum ReleaseReason {
  # The service-level reason that makes two physically identical releases
  # different receipts (0x05E).
  finished @0;    # normal release of a completed request
  cancelled @1;   # the client or scheduler cancelled the request
  truncated @2;   # suffix truncation; the request stays alive with a shorter context
  preempted @3;   # M5.2 preempted the request; its rows must be recomputed or reloaded
}

struct ReleaseResult $Kvrt.message {
  # ReleaseResult (0x00C "immutable allocation/release receipt", 0x05E): what
  # dropping a request's strong references did to physical state. The spec
  # names the record but gives no field list; it is rebuilt from 0x05E:
  # release and cancel share reference mechanics but report different reasons,
  # truncate removes only a suffix, and a full cached block whose last
  # reference goes becomes EVICTABLE rather than FREE (0x04B).
  transactionId @0 :UInt64 $Kvrt.type("TransactionId");
  requestId @1 :UInt64 $Kvrt.type("RequestId");
  requestGeneration @2 :UInt32 $Kvrt.type("RequestGeneration");     # generation whose references were dropped
  reason @3 :ReleaseReason;
  predecessorDigest @4 :Common.StateDigest;                         # committed allocator state before
  successorDigest @5 :Common.StateDigest;                           # committed allocator state after
  contextTokensBefore @6 :UInt32;                                   # logical length before [tokens]
  contextTokensAfter @7 :UInt32;                                    # kept length [tokens]: 0 unless truncated
  tableVersionAfter @8 :UInt64 $Kvrt.type("TableVersion");          # truncate publishes a new table version
  refcountDeltas @9 :List(RefcountDelta);                           # every handle whose count dropped
  freedHandles @10 :List(Common.PhysicalBlockHandle);               # reached zero refs with no cache key: FREE
  evictableHandles @11 :List(Common.PhysicalBlockHandle);           # zero refs with a cache key: EVICTABLE
  allocatorEpochAfter @12 :UInt64 $Kvrt.type("Epoch");
}

# ---- the batched operations a worker sends --------------------------------
#
# A batch is applied in order; each operation is answered by exactly one
# outcome at the same index. Operations are independent: one that fails
# answers a typed Error and leaves the allocator as it was (0x04F), and the
# batch goes on with the next (a scheduler iteration's appends for different
# requests must not fail together).

struct RequestFence {
  # The versions a transaction expects its request to be at (0x05C step 1).
  request @0 :UInt64 $Kvrt.type("RequestId");
  generation @1 :UInt32 $Kvrt.type("RequestGeneration");
  tableVersion @2 :UInt64 $Kvrt.type("TableVersion");
}

struct AllocateOp {
  promptRows @0 :UInt32;                              # logical rows of the new request [tokens]
  prefixHit @1 :List(Common.PhysicalBlockHandle);
  # Prefix-hit bundles taken by reference, bundle-major: entry i*G + g is
  # bundle i of cache group g. Each must be a valid, current block holding
  # every row the prompt sees in it (see copyTailRows for the last one).
  expectedEpoch :union {
    none @2 :Void;                                    # no epoch expectation
    epoch @3 :UInt64 $Kvrt.type("Epoch");             # the epoch the allocator must be at
  }
  namespaceName @4 :Text;
  # The cache namespace ("deployment/tenant") the request is served in, which
  # the session must have been granted. Its blocks count against that
  # namespace's and its trust domain's block quotas; forks inherit it. May be
  # empty only on a node that enforces no quota.
  copyTailRows @5 :UInt32;
  # 0: every prefixHit bundle is taken by reference. v in (0, P): the last
  # prefixHit bundle is an immutable partial tail (0x07D) whose rows [0, v)
  # the allocator copies into the request's own new bundle at that position
  # (the copy-rows intent); the request takes no reference to the tail [rows].
}

struct AppendOp {
  fence @0 :RequestFence;
  rows @1 :List(Data);
  # Rows of the appended token per cache group (B_row,g bytes each), or
  # empty: the worker writes the rows into the pool at the receipt's slot
  # itself and publishes them with CommitRowsOp (the shared-memory path).
  expectedEpoch :union {
    none @2 :Void;
    epoch @3 :UInt64 $Kvrt.type("Epoch");
  }
}

struct CommitRowsOp {
  fence @0 :RequestFence;
  validThrough @1 :UInt32;   # rows [0, valid_through) are written [tokens]
}

struct ForkOp {
  parent @0 :RequestFence;
}

struct TruncateOp {
  fence @0 :RequestFence;
  fromToken @1 :UInt32;      # first removed position [tokens]
  toToken @2 :UInt32;        # one past the last removed position; must equal the context (suffix only) [tokens]
}

struct ReleaseOp {
  fence @0 :RequestFence;
  reason @1 :ReleaseReason;  # finished or cancelled
}

struct TouchOp {
  fence @0 :RequestFence;
  bundles @1 :List(Common.PhysicalBlockHandle);   # bundle-major, as AllocateOp.prefix_hit
}

struct AcquireLeaseOp {
  handle @0 :Common.PhysicalBlockHandle;
}

struct ReleaseLeaseOp {
  lease @0 :UInt64 $Kvrt.type("LeaseId");
}

struct ReadTableOp {
  # Reads one request's block tables (the worker's view after a receipt it
  # lost, or a publisher's check). Answered by a BlockTableView.
  request @0 :UInt64 $Kvrt.type("RequestId");
}

struct AllocatorOp {
  union {
    allocate @0 :AllocateOp;
    append @1 :AppendOp;
    commitRows @2 :CommitRowsOp;
    fork @3 :ForkOp;
    truncate @4 :TruncateOp;
    release @5 :ReleaseOp;
    touch @6 :TouchOp;
    acquireLease @7 :AcquireLeaseOp;
    releaseLease @8 :ReleaseLeaseOp;
    readTable @9 :ReadTableOp;
  }
}

struct LeaseReceipt {
  # A granted lease (0x04B): a temporary strong reference on one block.
  lease @0 :UInt64 $Kvrt.type("LeaseId");
  handle @1 :Common.PhysicalBlockHandle;
  refsAfter @2 :UInt32;                    # the block's strong references with the lease [references]
}

struct LeaseReleaseReceipt {
  # The answer to ReleaseLeaseOp.
  lease @0 :UInt64 $Kvrt.type("LeaseId");
  handle @1 :Common.PhysicalBlockHandle;
  refsAfter @2 :UInt32;                    # [references]
}

struct BlockTableEntry {
  # One block of a request table with its committed facts.
  handle @0 :Common.PhysicalBlockHandle;
  validRows @1 :UInt32;                    # committed rows [rows]
  cacheKey @2 :UInt64 $Kvrt.type("CacheKey");  # weak cache identity; 0 = none
}

struct BlockTableView {
  fence @0 :RequestFence;                  # the versions the view was read at
  contextTokens @1 :UInt32;                # logical length [tokens]
  allocatorEpoch @2 :UInt64 $Kvrt.type("Epoch");
  groups @3 :List(List(BlockTableEntry));  # [cache group][logical block]
}

struct AllocatorOutcome {
  union {
    error @0 :Common.TypedError;
    allocationReceipt @1 :AllocationReceipt;
    releaseResult @2 :ReleaseResult;
    leaseReceipt @3 :LeaseReceipt;
    leaseReleaseReceipt @4 :LeaseReleaseReceipt;
    blockTableView @5 :BlockTableView;
  }
}

struct AllocatorBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(AllocatorOp);                 # applied in order [operations]
}

struct AllocatorBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(AllocatorOutcome);       # outcomes[i] answers ops[i] [operations]
}

struct FaultPointArm {
  # One named fault point of the allocator's core (after_reserve_group_<g>,
  # one per cache group): the transaction that reaches it for the nth time
  # fails there and rolls back to its predecessor digest (0x04F).
  name @0 :Text;
  nth @1 :UInt32;                          # fires on the nth reach, 1-based [reaches]
}

struct FaultArmRequest $Kvrt.message {
  # The fault_arm route: arms named fault points for fault-injection runs.
  # Refused unless the node runs with [node] fault_injection = true; checked
  # whole before anything changes (a bad name or nth arms nothing).
  trace @0 :Common.TraceContext;
  disarmAll @1 :Bool;                      # first disarm every armed point
  arm @2 :List(FaultPointArm);             # then arm these, in order
}

struct FaultPointFired {
  name @0 :Text;
  fired @1 :UInt64;                        # since the node started [firings]
}

struct FaultArmReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  armed @1 :List(FaultPointArm);           # every point armed now, nth = reaches still to go
  registered @2 :List(Text);               # every point this owner has, whether armed or not
  fired @3 :List(FaultPointFired);         # the points that have fired, by name
}
