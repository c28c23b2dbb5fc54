@0xb85a6c4974eed72a;
# The node protocol (issue 5): the batched owner operations a worker sends,
# the batch receipts the owners answer, session set-up and owner statistics.
# Mirrors services/protocol/*.hpp. Enum ordinals are those of allocator.capnp
# and reuse.capnp (the codec static_asserts them against C++).
#
# A batch is answered by a receipt whose outcomes[i] answers ops[i]; an
# operation that failed answers a TypedError in its slot and the batch goes on
# (services/allocator/allocator_ops.hpp).
#
# An optional value travels as an unnamed-member union group whose first
# member (discriminant 0, the zeroed default) is `none`: "absent" and "epoch 0"
# are different messages.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Common = import "common.capnp";
using Allocator = import "allocator.capnp";
using Reuse = import "reuse.capnp";
using Mapper = import "mapper.capnp";

# services/common/trace_context.hpp: one trace per scheduler iteration of a
# worker; every hop opens a child span parented at the span it received.
struct TraceContext {
  traceId @0 :UInt64;        # trace id; 0 = untraced
  spanId @1 :UInt64;         # the sender's span id
  parentSpanId @2 :UInt64;   # the span that caused this one; 0 at the root
}

# The versions a transaction expects its request to be at (0x05C step 1).
struct RequestFence {
  request @0 :UInt64;        # RequestId
  generation @1 :UInt32;     # RequestGeneration
  tableVersion @2 :UInt64;   # TableVersion
}

# ---- allocator owner --------------------------------------------------------

struct AllocateOp {
  promptRows @0 :UInt32;                              # logical rows of the new request [tokens]
  prefixHit @1 :List(Common.PhysicalBlockHandle);     # bundle-major: entry i*G + g [handles]
  expectedEpoch :union {
    none @2 :Void;                                    # no epoch expectation
    epoch @3 :UInt64;                                 # Epoch the allocator must be at
  }
}

struct AppendOp {
  fence @0 :RequestFence;
  rows @1 :List(Data);       # one row per cache group, B_row,g bytes each; empty (a null
                             # pointer) on the shared-memory path: the worker writes the
                             # slot itself, then sends CommitRowsOp
  expectedEpoch :union {
    none @2 :Void;
    epoch @3 :UInt64;        # Epoch
  }
}

struct CommitRowsOp {
  fence @0 :RequestFence;
  validThrough @1 :UInt32;   # rows [0, validThrough) are written [tokens]
}

struct ForkOp {
  parent @0 :RequestFence;
}

struct TruncateOp {
  fence @0 :RequestFence;
  fromToken @1 :UInt32;      # first removed position [tokens]
  toToken @2 :UInt32;        # one past the last removed position (the context) [tokens]
}

struct ReleaseOp {
  fence @0 :RequestFence;
  reason @1 :Allocator.ReleaseReason;
}

struct TouchOp {
  fence @0 :RequestFence;
  bundles @1 :List(Common.PhysicalBlockHandle);   # bundle-major [handles]
}

struct AcquireLeaseOp {
  handle @0 :Common.PhysicalBlockHandle;
}

struct ReleaseLeaseOp {
  lease @0 :UInt64;          # LeaseId
}

struct ReadTableOp {
  request @0 :UInt64;        # RequestId
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

# A granted lease (0x04B): a temporary strong reference on one block.
struct LeaseReceipt {
  lease @0 :UInt64;                        # LeaseId
  handle @1 :Common.PhysicalBlockHandle;
  refsAfter @2 :UInt32;                    # the block's strong references with the lease [references]
}

struct LeaseReleaseReceipt {
  lease @0 :UInt64;                        # LeaseId
  handle @1 :Common.PhysicalBlockHandle;
  refsAfter @2 :UInt32;                    # [references]
}

# One block of a request table with its committed facts.
struct BlockTableEntry {
  handle @0 :Common.PhysicalBlockHandle;
  validRows @1 :UInt32;      # committed rows [rows]
  cacheKey @2 :UInt64;       # weak cache identity; 0 = none
}

struct BlockTableView {
  fence @0 :RequestFence;                  # the versions the view was read at
  contextTokens @1 :UInt32;                # logical length [tokens]
  allocatorEpoch @2 :UInt64;               # Epoch
  groups @3 :List(List(BlockTableEntry));  # [cache group][logical block]
}

struct AllocatorOutcome {
  union {
    error @0 :Common.TypedError;
    allocationReceipt @1 :Allocator.AllocationReceipt;
    releaseResult @2 :Allocator.ReleaseResult;
    leaseReceipt @3 :LeaseReceipt;
    leaseReleaseReceipt @4 :LeaseReleaseReceipt;
    blockTableView @5 :BlockTableView;
  }
}

struct AllocatorBatch {
  trace @0 :TraceContext;
  ops @1 :List(AllocatorOp);                 # applied in order [operations]
}

struct AllocatorBatchReceipt {
  trace @0 :TraceContext;
  outcomes @1 :List(AllocatorOutcome);       # outcomes[i] answers ops[i] [operations]
}

# ---- prefix-index owner -----------------------------------------------------

struct PrefixMatchOp {
  namespaceName @0 :Text;                  # the granted cache namespace
  request @1 :UInt64;                      # RequestId
  requestGeneration @2 :UInt32;            # RequestGeneration
  tokens @3 :List(Int32);                  # the prompt, S_prompt token ids [tokens]
  logitsPath @4 :Reuse.LogitsPath;
}

# Publishes full blocks [firstBlock, endBlock) of a request the session owns.
struct PrefixPublishOp {
  namespaceName @0 :Text;
  request @1 :UInt64;                      # RequestId
  tokens @2 :List(Int32);                  # the request's token ids from position 0 [tokens]
  firstBlock @3 :UInt32;                   # [blocks]
  endBlock @4 :UInt32;                     # one past the last published block [blocks]
}

struct PrefixOp {
  union {
    match @0 :PrefixMatchOp;
    publish @1 :PrefixPublishOp;
  }
}

struct PrefixPublishReceipt {
  request @0 :UInt64;                      # RequestId
  published @1 :UInt32;                    # (block, group) entries added [entries]
  duplicates @2 :UInt32;                   # left untagged, digest already present [entries]
  already @3 :UInt32;                      # already tagged with this digest [entries]
  publicationGeneration @4 :UInt64;        # the index's publication generation after [generation]
}

struct PrefixOutcome {
  union {
    error @0 :Common.TypedError;
    matchReceipt @1 :Reuse.PrefixMatchReceipt;
    publishReceipt @2 :PrefixPublishReceipt;
  }
}

struct PrefixBatch {
  trace @0 :TraceContext;
  ops @1 :List(PrefixOp);                  # [operations]
}

struct PrefixBatchReceipt {
  trace @0 :TraceContext;
  outcomes @1 :List(PrefixOutcome);        # outcomes[i] answers ops[i] [operations]
}

# ---- session set-up (0x0CE) -------------------------------------------------

struct HelloRequest {
  token @0 :Text;                          # the principal's bearer token (hex); never logged
  workerName @1 :Text;                     # for logs and traces
  processId @2 :UInt32;                    # the worker's OS process id
}

# One shared-memory pool the worker may attach.
struct PoolAttachment {
  group @0 :UInt32;                        # CacheGroupId
  pool @1 :UInt32;                         # PoolId
  generation @2 :UInt32;                   # PoolGeneration
  segmentName @3 :Text;                    # POSIX shared-memory name; empty for a GPU pool
  segmentBytes @4 :UInt64;                 # [bytes]
  cudaIpcHandle @5 :Text;                  # GPU pool: CUDA IPC handle, 128 hex digits; empty otherwise
  cudaDevice @6 :UInt32;                   # GPU pool: the node's device ordinal
}

struct SessionReceipt {
  session @0 :UInt64;                      # SessionId
  principal @1 :Text;
  allowedNamespaces @2 :List(Text);
  layoutSha256 @3 :Data;                   # the layout the node serves [32 bytes]
  blockTokens @4 :UInt32;                  # allocator block size P [tokens]
  pools @5 :List(PoolAttachment);          # one per cache group, manifest order
  channelSocket @6 :Text;                  # the session channel's socket path; empty: none
  channelTicket @7 :Text;                  # binds a channel connection to this session (secret)
}

struct AuthorizeRequest {
  trace @0 :TraceContext;
  namespaceName @1 :Text;
}

# A namespace grant, void once the namespace's generation moves on.
struct NamespaceGrantReceipt {
  grantId @0 :UInt64;                      # grant id, unique per node
  namespaceName @1 :Text;
  generation @2 :UInt64;                   # NamespaceGeneration
  grantSha256 @3 :Data;                    # canonical digest of the grant (id, principal, namespace, generation) [32 bytes]
}

# ---- statistics -------------------------------------------------------------

struct StatValue {
  name @0 :Text;                           # stable snake_case name, unit in the name
  value @1 :Int64;                         # the gauge or counter [unit as named]
}

struct OwnerStats {
  owner @0 :Text;                          # "allocator", "prefix_index", ...
  validateOk @1 :Bool;                     # the owner's validate() on its current state
  validateError @2 :Text;                  # empty when validateOk
  values @3 :List(StatValue);
}

# ---- mapper owner (services/mapper/mapper_ops.hpp) ---------------------------

struct StepRequest {
  request @0 :UInt64;                      # RequestId
  targetTokens @1 :UInt32;                 # T_r [tokens]
}

enum ReleaseMode {
  retain @0;
  unmapNow @1;
}

enum MappingFeasibility {
  ready @0;
  insufficientHandles @1;
}

struct MapperAllocOp {
  request @0 :UInt64;                      # RequestId
  generation @1 :UInt32;                   # RequestGeneration
  expectedTokens @2 :UInt32;               # [tokens]
}

struct MapperStepOp {
  requests @0 :List(StepRequest);
  path @1 :Mapper.MappingPath;
}

struct MapperAppendOp {
  request @0 :UInt64;
  generation @1 :UInt64;                   # SlotGeneration
  validTokens @2 :UInt32;                  # [tokens]
}

struct MapperFreeOp {
  request @0 :UInt64;
  generation @1 :UInt64;                   # SlotGeneration
  mode @2 :ReleaseMode;
}

struct MapperOp {
  union {
    alloc @0 :MapperAllocOp;
    step @1 :MapperStepOp;
    append @2 :MapperAppendOp;
    free @3 :MapperFreeOp;
  }
}

struct SlotBinding {
  slot @0 :UInt32;                         # RequestSlot
  generation @1 :UInt64;                   # SlotGeneration
  retainedPages @2 :UInt32;                # [pages per tensor]
  retainedMappingReused @3 :Bool;
}

struct StepResult {
  feasibility @0 :MappingFeasibility;
  bundlesNeeded @1 :UInt32;                # [bundles]
  bundlesAvailable @2 :UInt32;             # [bundles]
  receipts @3 :List(Mapper.MappedFrontierReceipt);
}

struct MapperOutcome {
  union {
    error @0 :Common.TypedError;
    slotBinding @1 :SlotBinding;
    stepResult @2 :StepResult;
    done @3 :Void;
  }
}

struct MapperBatch {
  trace @0 :TraceContext;
  ops @1 :List(MapperOp);                  # applied in order [operations]
}

struct MapperBatchReceipt {
  trace @0 :TraceContext;
  outcomes @1 :List(MapperOutcome);        # outcomes[i] answers ops[i] [operations]
}

# ---- kernel executor owner (services/executor/executor_ops.hpp) ---------------

struct DecodeAttentionOp {
  request @0 :UInt64;                      # RequestId
  tableVersion @1 :UInt64;                 # TableVersion; 0 = current
  layer @2 :UInt32;                        # model layer
  qHeads @3 :UInt32;                       # H_q
  queries @4 :List(Float32);               # [H_q][d_qk]
}

struct AttentionOutput {
  request @0 :UInt64;
  tableVersion @1 :UInt64;
  layer @2 :UInt32;
  contextTokens @3 :UInt32;                # [tokens]
  outputs @4 :List(Float32);               # [H_q][d_v]
  lse @5 :List(Float32);                   # [H_q]
  kvRows @6 :UInt64;                       # [rows]
}

struct ExecuteOutcome {
  union {
    error @0 :Common.TypedError;
    attentionOutput @1 :AttentionOutput;
  }
}

struct ExecuteBatch {
  trace @0 :TraceContext;
  ops @1 :List(DecodeAttentionOp);         # applied in order [operations]
}

struct ExecuteBatchReceipt {
  trace @0 :TraceContext;
  outcomes @1 :List(ExecuteOutcome);       # outcomes[i] answers ops[i] [operations]
}

# ---- executable reuse (0x0CD; services/reuse/reuse_ops.hpp) ----------------

# The checked transaction order of 0x0CD (services/reuse/reuse_evidence.hpp).
# The C++ steps count from 1; ordinal 0 is no step and is refused on read.
enum ReuseStep {
  unspecified @0;
  authorize @1;
  buildKey @2;
  lookupCandidate @3;
  acquireLeases @4;
  validateVersions @5;
  validatePositions @6;
  awaitMapping @7;
  freezeSnapshot @8;
  execute @9;
  finish @10;
}

# Rejection reasons of the reuse funnel (0x0CF; services/telemetry/reuse_rejection.hpp).
# The bucket is a function of the reason, so it is not a field.
enum RejectionReason {
  unauthenticated @0;
  principalRevoked @1;
  namespaceDenied @2;
  namespaceClosed @3;
  staleNamespaceGeneration @4;
  crossNamespaceKey @5;
  noCandidate @6;
  semanticMismatch @7;
  layoutMismatch @8;
  isolationMismatch @9;
  collisionWitnessMissing @10;
  collisionWitnessMismatch @11;
  modulePositionMismatch @12;
  sessionIntervalMismatch @13;
  staleCandidateGeneration @14;
  staleIndexVersion @15;
  staleTreeVersion @16;
  stalePoolGeneration @17;
  frontierNotValid @18;
  leaseUnavailable @19;
  leaseIncomplete @20;
  mappingFrontierLag @21;
  staleSnapshotVersion @22;
  snapshotEvidenceDrift @23;
  executionFailed @24;
}

struct ReuseAcquireOp {
  namespaceName @0 :Text;                  # the cache namespace to reuse from
  request @1 :UInt64;                      # RequestId (0 before allocation)
  requestGeneration @2 :UInt32;            # RequestGeneration
  tokens @3 :List(Int32);                  # the prompt, S_prompt token ids [tokens]
  logitsPath @4 :Reuse.LogitsPath;
  requireCollisionWitness @5 :Bool;        # step 3 policy (0x07F)
}

struct ReuseRejectionReceipt {
  step @0 :ReuseStep;                      # the step the attempt ended at
  reason @1 :RejectionReason;
  detail @2 :Text;                         # operands; never tokens or salts
  leasesReleased @3 :List(UInt64);         # LeaseId: leases the attempt took and the node released
}

# Steps 9-10 for one receipt: whether the work that read its rows ran (step
# 9), then every lease of the attempt goes back to the owner that issued it
# (step 10). The attempt is named by its receipt's execution snapshot version.
struct ReuseSuccessor {
  request @0 :UInt64;                      # RequestId
  tokens @1 :List(Int32);                  # the request's token ids from position 0 [tokens]
  endBlock @2 :UInt32;                     # one past the last published block [blocks]
}

struct ReuseReleaseOp {
  snapshot @0 :UInt64;                     # ExecutionSnapshotVersion: the attempt
  executed @1 :Bool = true;                # the work that read the reused rows ran (C++ default true)
  successor @2 :ReuseSuccessor;            # absent: release only (step 10's first ending)
}

struct ReuseOp {
  union {
    acquire @0 :ReuseAcquireOp;
    release @1 :ReuseReleaseOp;
  }
}

struct ReuseReleaseReceipt {
  snapshot @0 :UInt64;                     # ExecutionSnapshotVersion: the attempt
  released @1 :List(UInt64);               # LeaseId: handed back to their owners [leases]
  refused @2 :List(UInt64);                # LeaseId: an owner no longer held them for the session [leases]
  completed @3 :Bool;                      # the attempt passed steps 9 and 10 (counted as executed, 0x0CF)
  successor @4 :PrefixPublishReceipt;      # a named successor's publication (absent: none, or refused)
  successorRefused @5 :Common.TypedError;  # why a named successor was not published (absent: it was, or none)
  publishedSuccessor @6 :Bool;             # step 10 ended as a published successor
}

struct ReuseOutcome {
  union {
    error @0 :Common.TypedError;
    executableReuseReceipt @1 :Reuse.ExecutableReuseReceipt;
    rejectionReceipt @2 :ReuseRejectionReceipt;
    releaseReceipt @3 :ReuseReleaseReceipt;  # answers a release op
  }
}

struct ReuseBatch {
  trace @0 :TraceContext;
  ops @1 :List(ReuseOp);                   # [operations]
}

struct ReuseBatchReceipt {
  trace @0 :TraceContext;
  outcomes @1 :List(ReuseOutcome);         # outcomes[i] answers ops[i] [operations]
}
