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

struct PrefixOp {
  union {
    match @0 :PrefixMatchOp;
    publish @1 :PrefixPublishOp;
    peek @2 :PrefixPeekOp;
  }
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
