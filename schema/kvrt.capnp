@0xd1c95bc3db80f598;
# kvrt wire schema. Every value that crosses an owner boundary (DESIGN.md,
# layer 2). Units are stated on every numeric field.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");

# A caller error (services/common/error.hpp): what failed, why, and which field
# or version failed.
struct TypedError {
  code @0 :UInt16;    # kvrt::ErrorCode numeric value
  reason @1 :Text;    # human-readable, with operands
  field @2 :Text;     # the field or version that failed; empty when not applicable
}
