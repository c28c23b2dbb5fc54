@0xd4106e9506d7dfe5;
# Exact-reuse receipts: prefix index (0x07G), radix index (0x08G), prompt
# modules (0x0CB), inactive sessions (0x0CC) and the executable-reuse gate
# (0x0CD). Mirrors services/receipts/*.hpp; enum ordinals equal the C++ enum
# values (the codec static_asserts it).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Common = import "common.capnp";

enum LogitsPath {
  logitsRequired @0;   # S_cap = S_prompt - 1
  noLogits @1;         # S_cap = S_prompt
}

# One matched full block in every cache group (0x07C lookup_all_groups).
struct MatchedBlockBundle {
  logicalBlock @0 :UInt32;                         # j [blocks]
  handles @1 :List(Common.PhysicalBlockHandle);    # one per cache group, manifest order
}

# PrefixMatchReceipt (spec 0x07G, prefix lengths of 0x07A).
struct PrefixMatchReceipt {
  requestId @0 :UInt64;                   # RequestId
  requestGeneration @1 :UInt32;           # RequestGeneration
  indexSnapshotId @2 :UInt64;             # IndexSnapshotId
  indexPublicationGeneration @3 :UInt64;  # [generation]
  compatibilityManifestSha256 @4 :Data;   # [32 bytes]
  namespaceId @5 :Text;
  namespaceGeneration @6 :UInt64;         # NamespaceGeneration
  policyId @7 :Text;
  alignmentTokens @8 :UInt32;             # hit granularity P [tokens]
  logitsPath @9 :LogitsPath;
  promptTokens @10 :UInt32;               # S_prompt [tokens]
  semanticMatchTokens @11 :UInt32;        # S_sem [tokens]
  indexedMatchTokens @12 :UInt32;         # S_indexed [tokens]
  reuseCapTokens @13 :UInt32;             # S_cap [tokens]
  runtimeHitTokens @14 :UInt32;           # S_runtime [tokens]
  promptRowsRecomputed @15 :UInt32;       # S_recompute [rows]
  matchedGroupHandles @16 :List(MatchedBlockBundle);
  newBlockBundles @17 :UInt32;            # ceil(S_recompute / P) [bundles]
  copyValidPartialRows @18 :UInt32;       # [rows]
  leaseId @19 :UInt64;                    # LeaseId holding the matched handles
  receiptSha256 @20 :Data;                # canonical digest of every other field [32 bytes]
}

# RadixSchedulerHandoffReceipt (spec 0x08G). scheduler_owner is the constant
# below and policy_decision is always None, so neither is a field.
const radixSchedulerOwner :Text = "M5.2";

struct RadixSchedulerHandoffReceipt {
  requestId @0 :UInt64;                 # RequestId
  requestGeneration @1 :UInt32;         # RequestGeneration
  treeVersion @2 :UInt64;               # TreeVersion
  treeStateSha256 @3 :Data;             # [32 bytes]
  promptTokens @4 :UInt32;              # S_prompt [tokens]
  matchedTokens @5 :UInt32;             # [tokens]
  prefixSlotIds @6 :List(UInt64);       # TokenSlotId per matched token [slots]
  pathNodeIds @7 :List(UInt64);         # RadixNodeId, root excluded, root -> terminal
  terminalNodeId @8 :UInt64;            # RadixNodeId
  suffixInterval @9 :Common.TokenInterval;  # rows still to compute [tokens]
  lockLeaseId @10 :UInt64;              # LeaseId
  lockRequiredUntilSchedulerDisposition @11 :Bool;
  freePrivateTailSlots @12 :UInt32;     # [rows]
  newUsefulKvBytes @13 :UInt64;         # [bytes]
  newPhysicalBlocks @14 :UInt32;        # [blocks]
  newPhysicalCapacityBytes @15 :UInt64; # [bytes]
  receiptSha256 @16 :Data;              # [32 bytes]
}

# PromptModuleReceipt (spec 0x0CB). |tokenIds| = |positionIds| = N_module.
struct PromptModuleReceipt {
  schemaId @0 :Text;
  schemaGeneration @1 :UInt64;          # [generation]
  moduleId @2 :Text;
  moduleParametersDigest @3 :Data;      # [32 bytes]
  tokenIds @4 :List(UInt32);            # [token ids]
  positionIds @5 :List(UInt32);         # declared positions [positions]
  semanticManifestDigest @6 :Data;      # [32 bytes]
  layoutManifestDigest @7 :Data;        # [32 bytes]
  namespaceId @8 :Text;
  namespaceGeneration @9 :UInt64;       # NamespaceGeneration
  physicalRefs @10 :List(Common.PhysicalRef);
}

# SessionReuseReceipt (spec 0x0CC).
struct SessionReuseReceipt {
  sessionId @0 :Text;
  tenantId @1 :Text;
  namespaceId @2 :Text;
  namespaceGeneration @3 :UInt64;        # NamespaceGeneration
  semanticDigest @4 :Data;               # [32 bytes]
  layoutDigest @5 :Data;                 # [32 bytes]
  coveredInterval @6 :Common.TokenInterval;  # [0, H) [tokens]
  coveredTokensDigest @7 :Data;          # [32 bytes]
  positionTruncationContract @8 :Text;
  publicationGeneration @9 :UInt64;      # [generation]
  sourceTierObjectId @10 :Text;          # M5.5 object identity
  resumePrefillTokens @11 :UInt32;       # U [tokens]
}

enum ReuseSource {
  prefixIndex @0;
  radixIndex @1;
  promptModule @2;
  session @3;
}

struct PoolGenerationRef {
  pool @0 :UInt32;        # PoolId
  generation @1 :UInt32;  # PoolGeneration
}

# ExecutableReuseReceipt (spec 0x0CD): evidence tuple
# E = (g_ns, d_sem, d_layout, v_index, v_tree, g_pool, f_map, v_exec).
struct ExecutableReuseReceipt {
  requestId @0 :UInt64;                 # RequestId
  requestGeneration @1 :UInt32;         # RequestGeneration
  source @2 :ReuseSource;
  namespaceId @3 :Text;
  namespaceGeneration @4 :UInt64;       # g_ns
  semanticDigest @5 :Data;              # d_sem [32 bytes]
  layoutDigest @6 :Data;                # d_layout [32 bytes]
  indexVersion @7 :UInt64;              # v_index [version]
  treeVersion @8 :UInt64;               # v_tree (TreeVersion)
  poolGenerations @9 :List(PoolGenerationRef);   # g_pool
  coveredInterval @10 :Common.TokenInterval;     # [tokens]
  physicalHandles @11 :List(Common.PhysicalBlockHandle);
  pathNodeIds @12 :List(UInt64);        # RadixNodeId
  leases @13 :List(UInt64);             # LeaseId
  collisionWitnessVerified @14 :Bool;
  requiredFrontierTokens @15 :UInt32;   # f_required [tokens]
  readyFrontierTokens @16 :UInt32;      # f_ready [tokens]
  executionSnapshotVersion @17 :UInt64; # v_exec (ExecutionSnapshotVersion)
  kernelAbiId @18 :Text;
}
