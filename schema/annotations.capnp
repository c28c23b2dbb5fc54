@0xa6c3cbf6bbfa9d06;
# How the declarations of schema/*.capnp become kvrt's C++ value types and
# their codec (schema/generator/capnpc_kvrt.cpp). Each message is declared
# once, here in the schema: the generator writes its plain C++ struct (no
# Cap'n Proto in it), the codec both ways, and the member-count checks.
#
# Without annotations a struct becomes a C++ aggregate of the same name in
# namespace kvrt, its fields in declaration order with snake_case names;
# an enum becomes `enum class : uint8_t` with snake_case enumerants and a
# k<Name>Max constant; a struct that is only an unnamed union becomes a
# std::variant of its members' types; a union group `{ none @n :Void; x @m :T; }`
# becomes std::optional<T>; List(T) becomes std::vector<T>; Text std::string;
# Data std::vector<uint8_t>.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvrt::wire");

# On a field: the C++ type of its value (of its elements, on a List). On an
# integer field, a strong id (RequestId, Epoch): the wire carries `.value`.
# On a Data field, a vocabulary type with a hand-written reader and writer
# (Sha256Digest: exactly 32 bytes, refused otherwise).
annotation type @0xecaea7a2fcdea507 (field) :Text;

# On a struct or an enum: the C++ type exists already, written by hand
# because it carries behaviour. The generator writes its codec only, by
# member name, and checks its member count (a struct) or every enumerant's
# value (an enum) at compile time, so neither side can drift.
annotation existing @0xaf8e27c345f443f3 (struct, enum) :Text;

# On a struct: its reader and writer are written by hand
# (schema/codec_handwritten.cpp); the generator only declares them. For the
# few vocabulary types whose wire form is not member by member.
annotation handwritten @0xebbe05e73b7663b3 (struct) :Void;

# On a struct: it may be the body of an Envelope, so encode() and decode<T>()
# are generated for it.
annotation message @0xed9b85049dbd67ac (struct) :Void;

# On a struct, Text or Data field: absence is a value of its own; the C++
# member is std::optional<T>.
annotation optional @0xe6f4207bc2e66a28 (field) :Void;

# On an enumerant of an `existing` enum: a wire value with no C++ enumerant
# (refused on read as unknown_enum).
annotation invalid @0xa47ea69405811b28 (enumerant) :Void;

# On a file: the headers its C++ types need (strong ids, existing types).
annotation include @0xd1807fac4a3c1c98 (file) :List(Text);
