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


struct DecodeAttentionOp {
  request @0 :UInt64 $Kvrt.type("RequestId");
  tableVersion @1 :UInt64 $Kvrt.type("TableVersion");   # the version the queries were computed against; 0 = current
  layer @2 :UInt32;                        # model layer
  qHeads @3 :UInt32;                       # H_q; H_kv comes from the layout
  queries @4 :List(Float32);               # [H_q][d_qk]
}

struct AttentionOutput {
  request @0 :UInt64 $Kvrt.type("RequestId");
  tableVersion @1 :UInt64 $Kvrt.type("TableVersion");   # the table version executed
  layer @2 :UInt32;
  contextTokens @3 :UInt32;                # keys attended [tokens]
  outputs @4 :List(Float32);               # [H_q][d_v]
  lse @5 :List(Float32);                   # [H_q]
  kvRows @6 :UInt64;                       # K/V rows read, per K/V head once [rows]
}

struct ExecuteOutcome {
  union {
    attentionOutput @0 :AttentionOutput;
    error @1 :Common.TypedError;
  }
}

struct ExecuteBatch $Kvrt.message {
  trace @0 :Common.TraceContext;
  ops @1 :List(DecodeAttentionOp);         # applied in order [operations]
}

struct ExecuteBatchReceipt $Kvrt.message {
  trace @0 :Common.TraceContext;
  outcomes @1 :List(ExecuteOutcome);       # outcomes[i] answers ops[i] [operations]
}
