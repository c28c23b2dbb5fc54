@0xfa27e283242b1a24;
# Values shared by several kvrt messages. Every numeric field states its unit.
# A SHA-256 digest travels as Data of exactly 32 bytes; the decoder rejects any
# other length (ErrorCode decode_failed, naming the field).
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");

# An owner's incremental 128-bit multiset digest of its committed state
# (services/common/state_digest.hpp): a divergence detector, not a
# cryptographic commitment.
struct StateDigest {
  lo @0 :UInt64;   # low 64-bit lane
  hi @1 :UInt64;   # high 64-bit lane
}

# Half-open token interval [begin, end) (services/common/token_interval.hpp).
struct TokenInterval {
  begin @0 :UInt32;   # first covered token position [tokens]
  end @1 :UInt32;     # one past the last covered position [tokens]
}

# Generation-fenced allocator handle (spec 0x04B, 0x05F).
struct PhysicalBlockHandle {
  pool @0 :UInt32;        # PoolId
  group @1 :UInt32;       # CacheGroupId
  block @2 :UInt32;       # PhysicalBlockId [block id, not a slot]
  generation @3 :UInt32;  # BlockGeneration: advanced on every recycle
}

# Pool-scoped physical identity PhysicalRef_g (spec 0x03A).
struct PhysicalRef {
  group @0 :UInt32;           # CacheGroupId g
  poolId @1 :UInt32;          # PoolId
  poolGeneration @2 :UInt32;  # PoolGeneration: a replaced pool never matches
  block @3 :UInt32;           # PhysicalBlockId p_g [block id]
}

# A caller error (services/common/error.hpp): what failed, why, and which field
# or version failed. An Envelope body of its own and an outcome inside the
# node protocol's batch receipts, hence here. Moved from kvrt.capnp with its
# type id pinned, so its identity (and its wire form) is unchanged.
struct TypedError @0xd116b16c7339e958 {
  code @0 :UInt16;    # kvrt::ErrorCode numeric value
  reason @1 :Text;    # human-readable, with operands
  field @2 :Text;     # the field or version that failed; empty when not applicable
}
