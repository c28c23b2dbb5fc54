#pragma once
// The codec between kvrt's value types and wire messages (docs/architecture.md,
// "Messages").
//
// Every message is declared once, in schema/<owner>.capnp. The generator
// (schema/generator/) writes its plain C++ type (schema/<owner>_types.hpp),
// and encode()/decode<T>() for it (schema/<owner>_codec.hpp). Those headers
// include no Cap'n Proto, so owner cores and actors that only move bytes never
// compile generated Cap'n Proto code.
//
// Every message travels as one kvrt::wire::Envelope: the schema version, the
// Cap'n Proto type id of its body, and the body. decode<T> accepts only a body
// of T's type, so bytes of one kind of message are never read as another.
//
// Decoding untrusted bytes never crashes and never throws: truncated,
// oversized, misaligned, trailing-garbage, bit-flipped or random input
// answers a typed Error (decode_failed, message_too_large, unknown_enum) whose
// field names what failed: "Type.field", "Type.list[3].member.field",
// "Envelope.schema_version" for a foreign schema version, "Envelope.body" for
// a message of another kind.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/result.hpp"

namespace kvrt::codec {

// Reader limits for untrusted input (Cap'n Proto ReaderOptions).
//
// The largest legitimate message is a PromptModuleReceipt (or a
// CacheCompatibilityManifest) covering 2^21 tokens (2 Mi tokens, above any
// context kvrt serves): its token and position lists are 2 x 2^21 x 4 bytes =
// 2^21 words, and one PhysicalRef (2 words) per 16-token block in each of up
// to 8 cache groups adds 2^17 x 8 x 2 = 2^21 words: 2^22 words (32 MiB) in
// all. The traversal limit is twice that, 2^23 words (64 MiB, Cap'n Proto's
// own default), so the largest legitimate message passes with its text and
// envelope to spare (tests/schema decodes it). Input longer than the limit
// plus a maximal segment table is refused before it is copied. Cap'n Proto
// counts the root, every struct or list pointer, and the elements of a struct
// list as one nesting level each. The deepest kvrt messages need 10: a
// PrefixBatchReceipt holding a RadixSchedulerHandoffReceipt, whose match
// receipt's bundles hold handles (Envelope, body, outcomes, its elements,
// the handoff, its match, the bundles, one bundle, its handles, a handle);
// an AllocatorBatchReceipt holding a BlockTableView needs 9. 16 leaves room
// for growth and rejects anything pathological.
struct DecodeLimits {
  uint64_t traversal_limit_words = uint64_t{1} << 23;  // [8-byte words]
  uint32_t nesting_limit = 16;                         // [pointer levels]
};

// The wire schema version every Envelope carries (kvrt.capnp wireSchemaVersion).
uint16_t wire_schema_version();

// Decodes one message whose body must be T. Specialized, with encode(const T&),
// by the generated schema/<owner>_codec.hpp of every message type.
template <class T>
Result<T> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

}  // namespace kvrt::codec
