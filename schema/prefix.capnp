@0xd4106e9506d7dfe5;
# The prefix-index owner's messages (services/prefix/): the receipt of a
# lookup (0x07G), and the batched lookups and publications a worker sends
# with the batch receipt the owner answers. The radix index owner answers
# the same messages (services/radix/).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
$Kvrt.include(["services/common/digest.hpp", "services/common/receipt_ids.hpp"]);

enum LogitsPath {
  # How the logits cap is derived (0x07A, 0x07C requires_logits).
  logitsRequired @0;   # generative request: S_cap = S_prompt - 1
  noLogits @1;         # prefill-only / embedding path: S_cap = S_prompt
}

struct MatchedBlockBundle {
  # One matched full block: its handle in every cache group (0x07C
  # lookup_all_groups: a digest present for only some groups is not a hit).
  logicalBlock @0 :UInt32;                         # j: block index in the prompt [blocks]
  handles @1 :List(Common.PhysicalBlockHandle);    # one per cache group, in manifest group order
}

struct PrefixMatchReceipt $Kvrt.message {
  # PrefixMatchReceipt (0x07G): what a prefix-index lookup proved and what
  # remains to execute. It is an immutable physical fact, not a scheduling
  # command (0x07C): M5.2 may consume its work and capacity figures.
  #
  # The four prefix lengths of 0x07A are all carried so that a consumer can
  # check the invariant chain
  #     0 <= S_runtime <= min(S_sem, S_indexed, S_cap) <= S_prompt,
  #     S_recompute = S_prompt - S_runtime
  # from the receipt alone; the 0x07G field list names S_sem, S_runtime and
  # S_recompute, the others come from 0x07A and 0x07C.
  # receipt_sha256 is canonical_digest() (services/prefix/prefix_match_receipt.hpp)
  # of every other field: a producer stores it, a consumer recomputes and compares.
  requestId @0 :UInt64 $Kvrt.type("RequestId");
  requestGeneration @1 :UInt32 $Kvrt.type("RequestGeneration");
  indexSnapshotId @2 :UInt64 $Kvrt.type("IndexSnapshotId");                   # index snapshot the lookup read
  indexPublicationGeneration @3 :UInt64;                                       # publication generation of that snapshot
  compatibilityManifestSha256 @4 :Data $Kvrt.type("Sha256Digest");             # the consumer manifest the candidates passed
  namespaceId @5 :Text;                                                        # authorized cache namespace (0x01A, 0x0CE)
  namespaceGeneration @6 :UInt64 $Kvrt.type("NamespaceGeneration");
  policyId @7 :Text;                      # reuse policy (full-block / partial-tail, 0x07D)
  alignmentTokens @8 :UInt32;             # policy.alignment_tokens: hit granularity P [tokens]
  logitsPath @9 :LogitsPath;
  promptTokens @10 :UInt32;               # S_prompt [tokens]
  semanticMatchTokens @11 :UInt32;        # S_sem [tokens]
  indexedMatchTokens @12 :UInt32;         # S_indexed [tokens]
  reuseCapTokens @13 :UInt32;             # S_cap [tokens]
  runtimeHitTokens @14 :UInt32;           # S_runtime [tokens]
  promptRowsRecomputed @15 :UInt32;       # S_recompute = S_prompt - S_runtime [rows]
  matchedGroupHandles @16 :List(MatchedBlockBundle);   # S_runtime / P bundles (full-block policy)
  newBlockBundles @17 :UInt32;            # N_new = ceil(S_recompute / P) [bundles] (0x07G)
  copyValidPartialRows @18 :UInt32;
  # Rows of an immutable partial tail to copy before a divergent write (0x07D) [rows].
  leaseId @19 :UInt64 $Kvrt.type("LeaseId");                     # lease holding the matched handles (0x01A step 5)
  receiptSha256 @20 :Data $Kvrt.type("Sha256Digest");             # canonical digest of every other field
}

# ---- the batched operations a worker sends --------------------------------
#
# A lookup names the cache namespace it reads; the node answers it only for a
# principal that the authorization owner granted that namespace at its
# current generation, and checks that before the index sees the tokens
# (0x0CE "Authorization Before Lookup").

struct MultimodalItem {
  identifier @0 :Text;                     # the input's content hash or feature id
  offset @1 :UInt32;                       # first prompt position it occupies [tokens]
  length @2 :UInt32;                       # positions it occupies, > 0 [tokens]
}

struct RequestIdentity {
  # What besides the tokens changes a request's K/V (0x07B, 0x07D): two
  # requests reuse each other's blocks only where all of it is equal. All
  # empty: a plain token prompt of the namespace's base model.
  adapterId @0 :Text;                      # the adapter (LoRA) the request runs with; empty: none
  adapterVersion @1 :Text;                 # its version; only with adapterId
  multimodal @2 :List(MultimodalItem);     # the multimodal inputs, with their positions
  promptEmbeddingSha256 @3 :List(Text);    # per hash block, SHA-256 (64 lowercase hex) of its prompt-embedding rows
  cacheSalt @4 :Text;                      # the request's own salt: it reuses only with requests of the same salt
}

struct PrefixMatchOp {
  namespaceName @0 :Text;                                         # the granted cache namespace
  request @1 :UInt64 $Kvrt.type("RequestId");                     # the request the match is for (receipt provenance)
  requestGeneration @2 :UInt32 $Kvrt.type("RequestGeneration");
  tokens @3 :List(Int32);                                         # the prompt, S_prompt token ids [tokens]
  logitsPath @4 :LogitsPath;
  identity @5 :RequestIdentity;                                   # the request's identity extras
}

struct PrefixPublishOp {
  # Publishes the full blocks [first_block, end_block) of an allocator request
  # the same session owns (and, with tailRows, a partial tail after them);
  # their rows must be committed.
  namespaceName @0 :Text;
  request @1 :UInt64 $Kvrt.type("RequestId");
  tokens @2 :List(Int32);                  # the request's token ids from position 0 [tokens]
  firstBlock @3 :UInt32;                   # [blocks]
  endBlock @4 :UInt32;                     # one past the last published block [blocks]
  identity @5 :RequestIdentity;            # the request's identity extras, as its lookup had them
  computedGeneration @6 :UInt64 $Kvrt.type("NamespaceGeneration");
  # The namespace generation the rows were computed under (the grant the
  # request was admitted with); 0: the session's current grant. A publication
  # whose generation is no longer current is refused as stale, so rows a
  # request computed with old weights never enter the successor (0x0CE).
  tailRows @7 :UInt32;
  # Also publish block endBlock's first tailRows rows as an immutable partial
  # tail (0x07D: its key hashes the rows and their count, so a longer
  # frontier never aliases it); tokens must cover them. Only on a node whose
  # reuse policy is immutable_partial_tail; 0: full blocks only [rows].
}

struct PrefixPeekOp {
  # The lookup of `match` answered without touching the index: no access
  # time, no hit count, no split of an edge, no lease, no reuse-funnel count
  # (an engine's scheduler asks how much of a prompt is cached before it
  # decides to admit it). Authorization before lookup holds as for a match
  # (0x0CE). Answered with the PrefixMatchReceipt a match would give at that
  # moment; its handles are a fact of the moment, leased by nobody.
  match @0 :PrefixMatchOp;
}

struct PrefixHandoffOp {
  # The scheduler handoff of 0x08G, answered by the radix index owner only:
  # the match of `match` (stamps and split as a match, 0x08B) frozen into a
  # RadixSchedulerHandoffReceipt, and a lock reference on the matched path
  # (0x08D) held for the session until the scheduler disposes of it. The
  # receipt is a physical fact, not a schedule: the engine's scheduler
  # decides (FCFS, LPM, deadlines, ...) and must then admit or release.
  # The hash-chain owner refuses it (invalid_argument, field "handoff").
  match @0 :PrefixMatchOp;
  freePrivateTailSlots @1 :UInt32;
  # Writable rows the request already owns at its private tail; they lower
  # the new-block estimate (0x08G new_physical_blocks) [rows].
}

enum HandoffDisposition {
  # What the scheduler did with a handoff (0x08G: "if M5.2 admits the request,
  # it retains or exchanges the lock ...; if it rejects or defers the request,
  # it must release the lease").
  admit @0;    # the receipt is checked against the tree (stale_tree_version,
               # receipt_tampered, path_slot_mismatch, unknown_lease) and the
               # lock is retained for the admitted request until it is released
  release @1;  # the lock ends: a rejected or deferred request, or an admitted
               # one whose blocks the allocator now references
}

struct PrefixHandoffDispositionOp {
  receipt @0 :RadixSchedulerHandoffReceipt;   # as the node answered it
  disposition @1 :HandoffDisposition;
}

struct PrefixOp {
  union {
    match @0 :PrefixMatchOp;
    publish @1 :PrefixPublishOp;
    peek @2 :PrefixPeekOp;
    handoff @3 :PrefixHandoffOp;
    handoffDisposition @4 :PrefixHandoffDispositionOp;
  }
}

struct RadixSchedulerHandoffReceipt {
  # RadixSchedulerHandoffReceipt (0x08G) as the node's radix owner answers a
  # PrefixHandoffOp: the match frozen with the path it read and the lock that
  # protects it. Over the allocator's pools a page of P_a rows is the unit
  # the tree stores (0x08A, page size P_a), so the spec's prefix_slot_ids
  # are the match's block bundles (match.matchedGroupHandles) and the
  # matched tokens are match.runtimeHitTokens. scheduler_owner = "M5.2" and
  # policy_decision = None are constants of the type (covered by the digest,
  # services/radix/radix_handoff_receipt.hpp).
  #
  # treeVersion is the tree's retraction version (v_tree of 0x0CD): it moves
  # whenever cached tokens leave the tree (an eviction, a withdrawn adoption,
  # a namespace generation retired). An admission of a receipt from another
  # version is refused as stale_tree_version, and the scheduler asks again.
  # A split or an insertion moves no cached token and does not stale it.
  match @0 :PrefixMatchReceipt;                                   # the lookup, digest included
  treeVersion @1 :UInt64 $Kvrt.type("TreeVersion");               # v_tree the match read
  pathNodeIds @2 :List(UInt64) $Kvrt.type("RadixNodeId");          # non-root nodes root -> terminal
  terminalNodeId @3 :UInt64 $Kvrt.type("RadixNodeId");            # the node the hit ends at; 0: the root (a miss)
  suffixInterval @4 :Common.TokenInterval;                        # prompt rows still to compute [tokens]
  lockLeaseId @5 :UInt64 $Kvrt.type("LeaseId");                   # the lock reference on the path (0x08D)
  lockRequiredUntilSchedulerDisposition @6 :Bool;                 # always true: admit or release it
  freePrivateTailSlots @7 :UInt32;                                # as the op gave it [rows]
  newUsefulKvBytes @8 :UInt64;          # (S_prompt - matched) * B_row [bytes]
  newPhysicalBlocks @9 :UInt32;         # ceil(max(to_compute - free tail, 0) / P) [blocks]
  newPhysicalCapacityBytes @10 :UInt64; # new_physical_blocks * P * B_row [bytes]
  receiptSha256 @11 :Data $Kvrt.type("Sha256Digest");            # canonical digest of every other field
}

struct HandoffDispositionReceipt {
  # The answer to a PrefixHandoffDispositionOp.
  requestId @0 :UInt64 $Kvrt.type("RequestId");
  lockLeaseId @1 :UInt64 $Kvrt.type("LeaseId");
  disposition @2 :HandoffDisposition;
  treeVersion @3 :UInt64 $Kvrt.type("TreeVersion");               # v_tree when it was disposed of
  pathNodeIds @4 :List(UInt64) $Kvrt.type("RadixNodeId");          # the locked path now (a split may add nodes)
}

struct PrefixPublishReceipt {
  request @0 :UInt64 $Kvrt.type("RequestId");
  published @1 :UInt32;                    # (block, group) entries added [entries]
  duplicates @2 :UInt32;                   # left untagged: the digest was present already [entries]
  already @3 :UInt32;                      # already tagged with this digest [entries]
  publicationGeneration @4 :UInt64;        # the index's publication generation after [generation]
}

struct PrefixOutcome {
  union {
    error @0 :Common.TypedError;
    matchReceipt @1 :PrefixMatchReceipt;
    publishReceipt @2 :PrefixPublishReceipt;
    handoffReceipt @3 :RadixSchedulerHandoffReceipt;
    handoffDisposition @4 :HandoffDispositionReceipt;
  }
}

struct PrefixBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(PrefixOp);                  # [operations]
}

struct PrefixBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(PrefixOutcome);        # outcomes[i] answers ops[i] [operations]
}
