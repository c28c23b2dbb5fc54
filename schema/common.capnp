@0xfa27e283242b1a24;
# Values every owner's messages share: handles, intervals, digests, trace
# context and the typed error. Every numeric field states its unit.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");
using Kvrt = import "annotations.capnp";
$Kvrt.include(["services/common/ids.hpp", "services/common/error.hpp", "services/common/state_digest.hpp",
               "services/common/trace_context.hpp"]);

struct StateDigest $Kvrt.existing("StateDigest") {
  # An owner's incremental 128-bit multiset digest of its committed state
  # (services/common/state_digest.hpp): a divergence detector, not a
  # cryptographic commitment.
  lo @0 :UInt64;   # low 64-bit lane
  hi @1 :UInt64;   # high 64-bit lane
}

struct TokenInterval {
  # Half-open token interval [begin, end) in logical token positions. Receipts
  # name the rows they cover with it (0x08G suffix_interval, 0x0CC covered
  # interval [0, H), 0x0CD covered_interval); begin <= end.
  begin @0 :UInt32;   # first covered token position [tokens]
  end @1 :UInt32;     # one past the last covered position [tokens]
}

struct PhysicalBlockHandle $Kvrt.message {
  # What the allocator hands out and counts references on (0x04B, 0x05F): the
  # generation fences ABA reuse of a block id (1003@12 vs 1003@13 in 0x05F), so
  # a stale handle is a reported caller error, never a silent alias of the
  # block's next owner.
  pool @0 :UInt32 $Kvrt.type("PoolId");                    # the pool that owns the block (one per cache group)
  group @1 :UInt32 $Kvrt.type("CacheGroupId");             # which layers and representation (0x03B)
  block @2 :UInt32 $Kvrt.type("PhysicalBlockId");          # identity inside the pool [block id, not a slot]
  generation @3 :UInt32 $Kvrt.type("BlockGeneration");     # advanced every time the block is recycled (0x05F)
}

struct PhysicalRef $Kvrt.message {
  # What a block table or a reuse receipt names (0x03A): scoped by the pool and
  # the pool's generation, so a block id from a replaced pool (new segment, new
  # namespace generation) never resolves.
  group @0 :UInt32 $Kvrt.type("CacheGroupId");             # g of PhysicalRef_g
  poolId @1 :UInt32 $Kvrt.type("PoolId");                  # pool_id_g
  poolGeneration @2 :UInt32 $Kvrt.type("PoolGeneration");  # a replaced pool never matches
  block @3 :UInt32 $Kvrt.type("PhysicalBlockId");          # p_g: physical_block_id [block id]
}

struct TraceContext $Kvrt.existing("TraceContext") {
  # The trace id and span id every batch carries (services/common/trace_context.hpp).
  traceId @0 :UInt64;        # one per scheduler iteration of one worker; 0 = untraced
  spanId @1 :UInt64;         # the sender's span
  parentSpanId @2 :UInt64;   # the span that caused this one; 0 at the root
}

struct TypedError @0xd116b16c7339e958 $Kvrt.existing("Error") $Kvrt.handwritten {
  # A caller error (services/common/error.hpp): what failed, why, and which
  # field or version failed. Its reader accepts only the codes this build knows.
  code @0 :UInt16;    # kvrt::ErrorCode numeric value
  reason @1 :Text;    # human-readable, with operands
  field @2 :Text;     # the field or version that failed; empty when not applicable
}

struct ErrorMessage $Kvrt.message {
  # An owner's answer when it cannot answer with the receipt asked for (the
  # request did not decode, the session was refused). Wrapping the error keeps
  # a decoded error (the Result's value) apart from a failure to decode (the
  # Result's error).
  error @0 :TypedError;
}
