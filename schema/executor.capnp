@0xe1d2c3b4a5968778;
# The kernel executor owner's messages (services/executor/): decode attention
# of one query row per query head of a request the session holds, computed
# by the node over its own pools. The node resolves the request's block
# table from the allocator owner itself, under the session's ownership and at
# the table version the worker names, so a worker can never point the kernels
# at rows it does not own (0x0BH: the executor reads only what a current
# receipt names). One outcome per op, in order; a failing op answers a typed
# Error and the batch goes on.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
using Common = import "common.capnp";
$Kvrt.include(["services/common/digest.hpp"]);


struct DecodeAttentionOp {
  request @0 :UInt64 $Kvrt.type("RequestId");
  tableVersion @1 :UInt64 $Kvrt.type("TableVersion");   # the version the queries were computed against; 0 = current
  layer @2 :UInt32;                        # model layer
  qHeads @3 :UInt32;                       # H_q; H_kv comes from the layout
  queries @4 :List(Float32);               # [H_q][d_qk]
  kernelBlockTokens @5 :UInt32;            # P_k: kernel blocks carved from allocator blocks; must divide P_a (0x0AC); 0 = the kernel's own
}

struct AttentionOutput {
  request @0 :UInt64 $Kvrt.type("RequestId");
  tableVersion @1 :UInt64 $Kvrt.type("TableVersion");   # the table version executed
  layer @2 :UInt32;
  contextTokens @3 :UInt32;                # keys attended [tokens]
  outputs @4 :List(Float32);               # [H_q][d_v]
  lse @5 :List(Float32);                   # [H_q]
  kvRows @6 :UInt64;                       # K/V rows read, per K/V head once [rows]
  kernelBlockTokens @7 :UInt32;            # P_k used [tokens]
  kernelBlocks @8 :UInt64;                 # ceil(T / P_k) per K/V head, summed (0x0AC split ledger) [blocks]
  partitions @9 :UInt64;                   # split-K partitions of ceil(T / P_part) [partitions]
}

struct ExecuteOutcome {
  union {
    attentionOutput @0 :AttentionOutput;
    error @1 :Common.TypedError;
  }
}

enum SharedPrefixDesign {
  # How a shared-prefix batch runs (0x0BA-0x0BD).
  auto @0;            # the node chooses: ChunkAttention for a tree of more than one shared level, else Hydragen
  hydragen @1;        # every chunk as one batched product over its coverage, then the LSE merge (0x0BC)
  chunkAttention @2;  # the prefix tree's two phases: chunk-first above tau, sequence-first below (0x0BD)
  perRequest @3;      # each request's own paged decode, shared blocks read once per request (0x0B)
}

struct SharedDecodeRequest {
  request @0 :UInt64 $Kvrt.type("RequestId");
  tableVersion @1 :UInt64 $Kvrt.type("TableVersion");   # the version its queries were computed against; 0 = current
  contextTokens @2 :UInt32;
  # Attend keys [0, contextTokens) only; 0 = the request's whole context. A
  # worker decoding a new row attends its committed rows here and merges
  # the new row's own partition itself (the exact LSE merge, 0x0BA) [tokens].
}

struct SharedPrefixDecodeOp {
  # Decode attention of one layer for requests of this session that hold
  # the same physical prefix blocks: the node builds the prefix tree from
  # the requests' own block tables (a worker names requests, never blocks,
  # so it cannot make the executor read rows it does not hold, 0x0BH) and
  # runs the design asked for, with the exact LSE merge.
  members @0 :List(SharedDecodeRequest);     # the sequences, in query order
  layer @1 :UInt32;                         # model layer
  qHeads @2 :UInt32;                        # H_q
  queries @3 :List(Float32);                # [members][H_q][d_qk]
  design @4 :SharedPrefixDesign;
  sharedThreshold @5 :UInt32;               # ChunkAttention's tau: chunk-first when coverage > tau; 0 = 1
}

struct SharedPrefixOutput {
  design @0 :SharedPrefixDesign;            # the design executed (never auto)
  fallbackReason @1 :Text;                  # why a shared design fell back to perRequest; empty otherwise
  levels @2 :UInt32;                        # most shared chunks on one sequence's path [chunks]
  chunks @3 :UInt32;                        # chunks of the prefix tree [chunks]
  sharedChunks @4 :UInt32;                  # of those, read by more than one sequence [chunks]
  rowsRead @5 :UInt64;                      # token rows of K/V the design read (each once, for every head) [rows]
  rowsPerRequest @6 :UInt64;                # what per-request decode reads: the members' contexts summed [rows]
  snapshotSha256 @7 :Data $Kvrt.type("Sha256Digest");   # the execution snapshot executed (0x0BB)
  kernelAbiSha256 @8 :Data $Kvrt.type("Sha256Digest");  # the kernel ABI it ran under: the layout's logical cache ABI
  outputs @9 :List(AttentionOutput);        # outputs[i] answers members[i]
}

struct SharedPrefixOutcome {
  union {
    output @0 :SharedPrefixOutput;
    error @1 :Common.TypedError;
  }
}

struct ExecuteBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(DecodeAttentionOp);         # applied in order [operations]
  shared @2 :List(SharedPrefixDecodeOp);   # applied after ops, in order [operations]
}

struct ExecuteBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(ExecuteOutcome);       # outcomes[i] answers ops[i] [operations]
  sharedOutcomes @2 :List(SharedPrefixOutcome);   # sharedOutcomes[i] answers shared[i] [operations]
}
