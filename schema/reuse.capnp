@0xc3b1a2f4e6d78091;
# The executable-reuse owner's messages (services/reuse/; spec 0x0CD): the
# receipt of a reuse attempt and of its release, the other exact-reuse
# receipts (prompt modules 0x0CB, inactive sessions 0x0CC), and the batched
# operations a worker sends with the batch receipt the node answers.
#
# A worker sends one ReuseBatch per scheduler iteration: one ReuseAcquireOp
# per new request, and one ReuseReleaseOp per receipt it is done with. The
# node runs steps 1-8 of 0x0CD for every acquire as an explicit message
# sequence between its owners (services/reuse/reuse_batch_run.hpp) and
# answers one outcome per op:
#   - ExecutableReuseReceipt: the use gate held. Its leases belong to the
#     session and its attempt stays open on the node; the worker takes the
#     blocks into its request's own references (AllocateOp with the
#     receipt's handles) and later ends the attempt with a ReuseReleaseOp.
#     A session's end drops its open attempts; the owners reclaim the leases.
#   - ReuseRejectionReceipt: the attempt ended at one step, for one reason,
#     in one funnel bucket (0x0CF). Any lease it took is already released.
#     The request falls back to recomputation (0x0CG): reuse lost, exactness
#     kept.
#   - Error: the op itself is malformed (empty namespace or tokens).
# A ReuseReleaseOp ends one receipt's attempt: the worker reports whether
# the work that read the reused rows ran (step 9), and the node hands each
# of the attempt's leases back to the owner that issued it (step 10: block
# leases to the allocator, radix path leases to the radix index). An
# attempt the session does not hold open (unknown, another session's, or
# already released) answers a typed error and nothing changes.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
using Prefix = import "prefix.capnp";
$Kvrt.include(["services/common/digest.hpp", "services/common/receipt_ids.hpp",
               "services/reuse/reuse_step.hpp", "services/telemetry/reuse_rejection.hpp"]);

enum ReuseSource {
  # Which owner proposed the candidate.
  prefixIndex @0;    # hash-chain full/partial blocks (0x07)
  radixIndex @1;     # radix tree path (0x08)
  promptModule @2;   # declared module (0x0CB)
  session @3;        # inactive session history (0x0CC)
}

struct PoolGenerationRef {
  # g_pool for one pool: require_all_pool_generations (0x0CD).
  pool @0 :UInt32 $Kvrt.type("PoolId");
  generation @1 :UInt32 $Kvrt.type("PoolGeneration");
}

struct ExecutableReuseReceipt $Kvrt.message {
  # ExecutableReuseReceipt (0x0CD): the end of one reuse attempt. It binds the
  # evidence tuple
  #     E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec)
  # to the leases and the frozen execution snapshot. It exists only when the
  # use gate G_auth & G_compat & G_version & G_lease & G_map & G_snapshot held;
  # an index match without it is not an executable hit.
  requestId @0 :UInt64 $Kvrt.type("RequestId");
  requestGeneration @1 :UInt32 $Kvrt.type("RequestGeneration");
  source @2 :ReuseSource;
  namespaceId @3 :Text;                                                # authorized cache namespace
  namespaceGeneration @4 :UInt64 $Kvrt.type("NamespaceGeneration");   # g_ns
  semanticDigest @5 :Data $Kvrt.type("Sha256Digest");                  # d_sem: compatibility manifest digest
  layoutDigest @6 :Data $Kvrt.type("Sha256Digest");                    # d_layout: layout manifest digest
  indexVersion @7 :UInt64;                                             # v_index: prefix-index publication version
  treeVersion @8 :UInt64 $Kvrt.type("TreeVersion");                    # v_tree: radix-tree version (0 if not radix)
  poolGenerations @9 :List(PoolGenerationRef);                         # g_pool of every pool dereferenced
  coveredInterval @10 :Common.TokenInterval;                           # rows reused [tokens]
  physicalHandles @11 :List(Common.PhysicalBlockHandle);               # path_and_physical_refs: blocks read
  pathNodeIds @12 :List(UInt64) $Kvrt.type("RadixNodeId");             # radix path nodes leased (empty otherwise)
  leases @13 :List(UInt64) $Kvrt.type("LeaseId");                      # leases covering every handle and path node
  collisionWitnessVerified @14 :Bool;          # step 3: witness checked where policy requires it
  requiredFrontierTokens @15 :UInt32;          # f_required: rows the kernel dereferences [tokens]
  readyFrontierTokens @16 :UInt32;
  # f_ready (f_map): rows mapped and ready [tokens]; L_map = max(0, required
  # - ready) must be 0 (0x0CF).
  executionSnapshotVersion @17 :UInt64 $Kvrt.type("ExecutionSnapshotVersion");  # v_exec
  kernelAbiId @18 :Text;                       # kernel ABI frozen with the snapshot (step 8)
}

struct PromptModuleReceipt $Kvrt.message {
  # PromptModuleReceipt (0x0CB): a declared prompt module whose K/V were
  # computed under a schema's position contract. The module is a hit only if
  # tokens, positions, schema generation and semantic ABI all match:
  #     H_module = [T_p = T_c][Pi_p = Pi_c][S_p = S_c][A_p = A_c]
  # and the two sequences have equal length N_module = |token_ids| = |position_ids|.
  schemaId @0 :Text;                                                # the prompt schema (PML) that declares the module
  schemaGeneration @1 :UInt64;                                      # advanced whenever the schema changes [generation]
  moduleId @2 :Text;
  moduleParametersDigest @3 :Data $Kvrt.type("Sha256Digest");       # parameters the module was rendered with
  tokenIds @4 :List(UInt32);                                        # exact token ids [token id per position]
  positionIds @5 :List(UInt32);                                     # declared positions, may be discontinuous [positions]
  semanticManifestDigest @6 :Data $Kvrt.type("Sha256Digest");       # CacheCompatibilityManifest the K/V were computed under
  layoutManifestDigest @7 :Data $Kvrt.type("Sha256Digest");         # CacheLayoutManifest of the stored bytes
  namespaceId @8 :Text;                                             # authorized cache namespace
  namespaceGeneration @9 :UInt64 $Kvrt.type("NamespaceGeneration");
  physicalRefs @10 :List(Common.PhysicalRef);                       # blocks holding the module's K/V, every cache group
}

struct SessionReuseReceipt $Kvrt.message {
  # SessionReuseReceipt (0x0CC): M5.3's identity receipt for the historical K/V
  # [0, H) of an inactive multi-turn session. M5.5 owns where the rows live and
  # how they are loaded; this receipt only proves what they are. Resuming
  # reduces logical prefill from H + U to U tokens only while every field here
  # still matches (an adapter, model, position-contract, quantizer or namespace
  # change is a compatibility failure even if the session id is unchanged).
  sessionId @0 :Text;                                               # authorized session identity
  tenantId @1 :Text;
  namespaceId @2 :Text;                                             # authorized cache namespace (0x0CE)
  namespaceGeneration @3 :UInt64 $Kvrt.type("NamespaceGeneration");
  semanticDigest @4 :Data $Kvrt.type("Sha256Digest");               # model/cache semantic (compatibility manifest) digest
  layoutDigest @5 :Data $Kvrt.type("Sha256Digest");                 # physical representation/layout digest
  coveredInterval @6 :Common.TokenInterval;                         # exact covered history [0, H) [tokens]
  coveredTokensDigest @7 :Data $Kvrt.type("Sha256Digest");          # SHA-256 of the exact token ids covered
  positionTruncationContract @8 :Text;                              # position/truncation contract id
  publicationGeneration @9 :UInt64;                                 # [generation]
  sourceTierObjectId @10 :Text;                                     # M5.5 object holding the saved rows
  resumePrefillTokens @11 :UInt32;                                  # U: new user tokens still to prefill [tokens]
}

enum ReuseStep $Kvrt.existing("ReuseStep") {
  # The checked transaction order of 0x0CD (services/reuse/reuse_step.hpp).
  # The C++ steps count from 1; ordinal 0 is no step and is refused on read.
  unspecified @0 $Kvrt.invalid;
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

enum RejectionReason $Kvrt.existing("RejectionReason") {
  # Rejection reasons of the reuse funnel (0x0CF; services/telemetry/reuse_rejection.hpp).
  # The bucket is a function of the reason (bucket_of), so it is not a field.
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

# ---- the batched operations a worker sends --------------------------------

struct ReuseAcquireOp {
  namespaceName @0 :Text;                                         # the cache namespace to reuse from
  request @1 :UInt64 $Kvrt.type("RequestId");                     # receipt provenance (0 before allocation)
  requestGeneration @2 :UInt32 $Kvrt.type("RequestGeneration");
  tokens @3 :List(Int32);                                         # the prompt, S_prompt token ids [tokens]
  logitsPath @4 :Prefix.LogitsPath;
  requireCollisionWitness @5 :Bool;                               # step 3 policy (0x07F)
  identity @6 :Prefix.RequestIdentity;                            # the request's identity extras (0x07B)
  # Virtual reservations (0x06): the reused rows will be copied into, and
  # read from, the request slot this session bound in the mapper owner under
  # slotRequest, so step 7 asks the mapper whether that slot's published
  # frontier covers them (L_map > 0 ends the attempt as mapping_lag, 0x0CF).
  # False: the rows are read in the paged pools, mapped whole while leased.
  awaitSlotMapping @7 :Bool;
  slotRequest @8 :UInt64 $Kvrt.type("RequestId");                 # the mapper's request id of the slot
}

struct ReuseRejectionReceipt {
  step @0 :ReuseStep = authorize;                                 # the step the attempt ended at
  reason @1 :RejectionReason = noCandidate;
  detail @2 :Text;                                                # operands; never tokens or salts
  leasesReleased @3 :List(UInt64) $Kvrt.type("LeaseId");          # leases the attempt took and the node released
}

struct ReuseSuccessor {
  # Step 10's other ending (0x0CD: "release leases, or publish one complete COW
  # successor atomically"): the request that read the reused rows committed
  # rows after them, and its full blocks [0, end_block) become visible in the
  # attempt's own namespace, in one publication covering every cache group,
  # before the attempt's leases go back. The publication is the index owner's
  # ordinary one under the session (the request must be the session's, its
  # rows committed); a refused one publishes nothing.
  request @0 :UInt64 $Kvrt.type("RequestId");
  tokens @1 :List(Int32);                  # the request's token ids from position 0 [tokens]
  endBlock @2 :UInt32;                     # one past the last published block [blocks]
}

struct ReuseReleaseOp {
  # Steps 9-10 for one receipt: whether the work that read its rows ran (the
  # worker's execution report, step 9), then, when a successor is named, its
  # publication, then every lease of the attempt goes back to the owner that
  # issued it (step 10). The attempt is named by its receipt's
  # execution_snapshot_version, unique on the node. A successor needs
  # executed = true (work that did not run produced nothing to publish).
  snapshot @0 :UInt64 $Kvrt.type("ExecutionSnapshotVersion");
  executed @1 :Bool = true;                # the work that read the reused rows ran
  successor @2 :ReuseSuccessor $Kvrt.optional;   # absent: release only (step 10's first ending)
}

struct ReuseOp {
  union {
    acquire @0 :ReuseAcquireOp;
    release @1 :ReuseReleaseOp;
  }
}

struct ReuseReleaseReceipt {
  snapshot @0 :UInt64 $Kvrt.type("ExecutionSnapshotVersion");     # the attempt
  released @1 :List(UInt64) $Kvrt.type("LeaseId");                # handed back to their owners [leases]
  refused @2 :List(UInt64) $Kvrt.type("LeaseId");                 # an owner no longer held them for the session [leases]
  completed @3 :Bool;              # the attempt passed steps 9 and 10 (counted as executed, 0x0CF)
  successor @4 :Prefix.PrefixPublishReceipt $Kvrt.optional;
  # A named successor: the index's publication receipt (published_successor:
  # it made new entries visible after what the attempt read) or why nothing
  # was published. Either way the leases went back.
  successorRefused @5 :Common.TypedError $Kvrt.optional;
  publishedSuccessor @6 :Bool;     # step 10 ended as a published successor
}

struct ReuseOutcome {
  union {
    error @0 :Common.TypedError;
    executableReuseReceipt @1 :ExecutableReuseReceipt;
    rejectionReceipt @2 :ReuseRejectionReceipt;
    releaseReceipt @3 :ReuseReleaseReceipt;  # answers a release op
  }
}

struct ReuseBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(ReuseOp);                   # [operations]
}

struct ReuseBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(ReuseOutcome);         # outcomes[i] answers ops[i] [operations]
}

# ---- inactive sessions: the session tier (0x0CC) ----------------------------
#
# A multi-turn session that goes inactive saves its history [0, H) (tokens
# and every cache group's rows) to the node's session tier ([tier] in the
# node config); its next turn resumes it. The node builds the identity the
# history is saved and checked under itself: the tenant is the session's
# principal, the namespace and generation are its grant's, the semantic
# digest is the namespace generation's compatibility manifest with the
# request's identity extras (adapter, ...), the layout digest the node's. A
# resume answers the rows only while every field still holds; otherwise a
# refusal, and the turn recomputes [0, H + U).

enum SessionTierRefusal {
  # Why a resume found nothing it may use (services/tier/session_history.hpp).
  noSavedHistory @0;           # nothing saved for this (tenant, namespace, session)
  namespaceRotated @1;         # saved under another namespace generation
  semanticChanged @2;          # another model, weights or adapter
  layoutChanged @3;            # another dtype, quantizer or layout
  positionContractChanged @4;
  historyNotPrefix @5;         # the prompt does not continue the history, or adds nothing
  incompleteSave @6;           # the saved object is missing, short, or fails its digest
}

struct SessionSaveRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;                  # a namespace the session was granted
  sessionLabel @2 :Text;                   # the engine's conversation id
  tokens @3 :List(Int32);                  # the history [0, H) [tokens]
  groupRows @4 :List(Data);                # per cache group: H canonical rows (K then V), B_row,g bytes each
  identity @5 :Prefix.RequestIdentity;     # the identity extras the rows were computed with
  positionContract @6 :Text;               # how positions were assigned; empty: "absolute"
}

struct SessionSaveReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  receipt @1 :SessionReuseReceipt;
}

struct SessionResumeRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  sessionLabel @2 :Text;
  prompt @3 :List(Int32);                  # the new turn's whole prompt: history then new tokens [tokens]
  identity @4 :Prefix.RequestIdentity;
  positionContract @5 :Text;
}

struct SessionResumed {
  receipt @0 :SessionReuseReceipt;         # resumePrefillTokens = U
  groupRows @1 :List(Data);                # per cache group: the H saved rows
}

struct SessionResumeRefusal {
  refusal @0 :SessionTierRefusal;
  reason @1 :RejectionReason;              # its reuse-funnel reason (0x0CF)
  detail @2 :Text;                         # the field that differs; never tokens
}

struct SessionResumeOutcome {
  union {
    resumed @0 :SessionResumed;
    refused @1 :SessionResumeRefusal;
  }
}

struct SessionResumeReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcome @1 :SessionResumeOutcome;
}

# ---- Prompt Cache through the node (0x0CB) -------------------------------------
# A namespace's prompt schemas, and the module store the reuse owner keeps
# for them. A module's K/V live in pool blocks: its publisher computed them
# alone at the module's declared positions (the module attends only to its
# own tokens, the contract that makes it reusable in any prompt of the
# schema) in a request of its own, and the store holds node leases on those
# blocks. An assembly answers each reused module with its receipt and
# session leases on its blocks, which the worker gives back with the
# allocator's ReleaseLeaseOp once it has copied the rows (the session's end
# gives back what is left).

struct PromptParameter {
  name @0 :Text;
  value @1 :Text;
}

struct PromptSchemaRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;                  # a namespace the session was granted
  schemaToml @2 :Text;                     # the schema (docs/operations.md, "Prompt Cache")
}

struct PromptSchemaReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  schemaId @2 :Text;
  generation @3 :UInt64;                   # the registered generation [generation]
  schemaDigest @4 :Data $Kvrt.type("Sha256Digest");  # of the modules and ranges as registered
  modules @5 :UInt32;                      # declared modules [modules]
  staleModules @6 :UInt32;
  # Modules stored under an older generation of this schema: no prompt of
  # this one reuses them (a miss of S, or of Pi where the module moved), and
  # a module computed under it replaces each [modules].
}

struct PromptItemSpec {
  # One item of a prompt: a declared module with its parameters, or free
  # text (moduleId empty) placed in a gap from gapBegin.
  moduleId @0 :Text;
  parameters @1 :List(PromptParameter);
  tokens @2 :List(Int32);                  # the item as rendered [tokens]
  gapBegin @3 :UInt32;                     # free text only: its first position [positions]
  useCache @4 :Bool;                       # a module the application wants computed afresh: false
}

struct PromptAssembleRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  schemaId @2 :Text;
  schemaGeneration @3 :UInt64;             # the generation the prompt was written against
  items @4 :List(PromptItemSpec);          # in prompt order
}

struct PromptModuleUse {
  receipt @0 :PromptModuleReceipt;
  handles @1 :List(Common.PhysicalBlockHandle);  # the module's blocks, bundle-major (block i of every group)
  leases @2 :List(UInt64);                 # the session's leases on them, one per handle
}

struct PromptModuleMiss {
  reason @0 :RejectionReason;              # the first factor of H_module that failed (0x0CF bucket)
  detail @1 :Text;                         # which one, never tokens
}

struct PromptComputed {
  # Free text, or a module the prompt asked to be computed afresh.
}

struct PromptSegmentOutcome {
  union {
    computed @0 :PromptComputed;
    reused @1 :PromptModuleUse;
    missed @2 :PromptModuleMiss;           # compute it at its declared positions
  }
}

struct PromptSegment {
  item @0 :UInt32;                         # the request's item
  moduleId @1 :Text;                       # empty: free text
  positionBegin @2 :UInt32;                # positions [begin, begin + tokens) [positions]
  tokens @3 :UInt32;                       # [tokens]
  outcome @4 :PromptSegmentOutcome;
}

struct PromptAssemblyReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  schemaId @1 :Text;
  schemaGeneration @2 :UInt64;
  namespaceGeneration @3 :UInt64 $Kvrt.type("NamespaceGeneration");
  segments @4 :List(PromptSegment);        # in declared position order
  reusedTokens @5 :UInt64;                 # [tokens]
  computedTokens @6 :UInt64;               # [tokens]
}

struct PromptModulePublishRequest $Kvrt.message {
  trace @0 :Common.TraceContext;
  namespaceName @1 :Text;
  schemaId @2 :Text;
  schemaGeneration @3 :UInt64;
  moduleId @4 :Text;
  parameters @5 :List(PromptParameter);
  tokens @6 :List(Int32);                  # the module as rendered [tokens]
  request @7 :UInt64 $Kvrt.type("RequestId");
  # The session's request whose rows [0, tokens) hold the module's K/V,
  # computed alone at its declared positions and committed.
}

struct PromptModulePublishReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  receipt @1 :PromptModuleReceipt;
  replaced @2 :Bool;                       # an earlier receipt of the same module and parameters went
}
