@0xd1c95bc3db80f598;
# The kvrt wire envelope. Every kvrt message is one Envelope: a schema
# version, the Cap'n Proto type id of its body's struct, and the body. A
# reader names the body it expects, so bytes of one message kind can never
# be decoded as another (Cap'n Proto itself carries no type tag). A message
# declared in any schema/*.capnp file with $Kvrt.message is an Envelope body
# without a line added here.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");

# Wire schema version carried by every Envelope; a reader rejects any other
# value (decode_failed, field Envelope.schema_version). Bump it whenever a
# field changes meaning; adding a field at a new ordinal needs no bump.
# Version 2: the body is named by its type id instead of a union member.
const wireSchemaVersion :UInt16 = 2;

struct Envelope {
  schemaVersion @0 :UInt16;   # = wireSchemaVersion
  bodyType @1 :UInt64;        # capnp::typeId of the body's struct
  body @2 :AnyPointer;
}
