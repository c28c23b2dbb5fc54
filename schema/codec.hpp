#pragma once
// Codec between core value types and kvrt wire messages (DESIGN.md, layer 2).
//
// Core types in, bytes out: this header includes no Cap'n Proto, so owner
// cores and actors that only move bytes never compile generated code. Every
// message is one kvrt::wire::Envelope (schema/kvrt.capnp) holding exactly one
// body; decode<T> accepts only the body of T.
//
// Decoding untrusted bytes never crashes and never throws: truncated, oversized,
// misaligned, trailing-garbage, bit-flipped or random input answers a typed
// Error (decode_failed, message_too_large, unknown_enum) whose field names what
// failed: "Type.field", "Envelope.schema_version" for a foreign schema version,
// "Envelope.body" for a message of another kind.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/allocator/allocation_receipt.hpp"
#include "services/reuse/executable_reuse_receipt.hpp"
#include "services/mapper/mapped_frontier_receipt.hpp"
#include "services/common/physical_block_handle.hpp"
#include "services/prefix/prefix_match_receipt.hpp"
#include "services/reuse/prompt_module_receipt.hpp"
#include "services/radix/radix_handoff_receipt.hpp"
#include "services/allocator/release_result.hpp"
#include "services/reuse/session_reuse_receipt.hpp"

namespace kvrt::codec {

// A typed error carried as a message body (an owner's answer). Wrapping it
// keeps a decoded error (the Result's value) apart from a failure to decode
// (the Result's error).
struct ErrorMessage {
  Error error;
  friend bool operator==(const ErrorMessage&, const ErrorMessage&) = default;
};

// Reader limits for untrusted input (Cap'n Proto ReaderOptions).
//
// The largest legitimate message is a PromptModuleReceipt (or a
// CacheCompatibilityManifest) covering 2^21 tokens (2 Mi tokens, above any
// context kvrt serves): its token and position lists are 2 x 2^21 x 4 bytes =
// 2^21 words, and one PhysicalRef (2 words) per 16-token block in each of up
// to 8 cache groups adds 2^17 x 8 x 2 = 2^21 words: 2^22 words (32 MiB) in
// all. The traversal limit is twice that, 2^23 words (64 MiB, Cap'n Proto's
// own default), so the largest legitimate message passes with its text and
// envelope to spare (tests/codec_test.cpp decodes it). Input longer than the
// limit plus a maximal segment table is refused before it is copied. Cap'n
// Proto counts the root, every struct or list pointer, and the elements of a
// struct list as one nesting level each. The deepest kvrt messages need 9: an
// AllocatorBatchReceipt holding a BlockTableView (Envelope, body, outcomes,
// its elements, the view, groups, one group, its entries, entry.handle) and a
// PrefixBatchReceipt holding a PrefixMatchReceipt (codec_node_test.cpp checks
// it); 16 leaves room for growth and rejects anything pathological.
struct DecodeLimits {
  uint64_t traversal_limit_words = uint64_t{1} << 23;  // [8-byte words]
  uint32_t nesting_limit = 16;                         // [pointer levels]
};

// The wire schema version every Envelope carries (kvrt.capnp wireSchemaVersion).
uint16_t wire_schema_version();

std::vector<uint8_t> encode(const Error& value);
std::vector<uint8_t> encode(const ErrorMessage& value);
std::vector<uint8_t> encode(const CacheLayoutManifest& value);
std::vector<uint8_t> encode(const CacheCompatibilityManifest& value);
std::vector<uint8_t> encode(const CacheIsolationNamespace& value);
std::vector<uint8_t> encode(const PhysicalBlockHandle& value);
std::vector<uint8_t> encode(const PhysicalRef& value);
std::vector<uint8_t> encode(const AllocationTxn& value);
std::vector<uint8_t> encode(const AllocationReceipt& value);
std::vector<uint8_t> encode(const ReleaseResult& value);
std::vector<uint8_t> encode(const PrefixMatchReceipt& value);
std::vector<uint8_t> encode(const RadixSchedulerHandoffReceipt& value);
std::vector<uint8_t> encode(const MappedFrontierReceipt& value);
std::vector<uint8_t> encode(const PromptModuleReceipt& value);
std::vector<uint8_t> encode(const SessionReuseReceipt& value);
std::vector<uint8_t> encode(const ExecutableReuseReceipt& value);

// Decodes one message whose body must be T. Defined (explicitly specialized)
// for ErrorMessage and every type encode() accepts except Error itself.
template <class T>
Result<T> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

template <>
Result<ErrorMessage> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<CacheLayoutManifest> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<CacheCompatibilityManifest> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<CacheIsolationNamespace> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PhysicalBlockHandle> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PhysicalRef> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<AllocationTxn> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<AllocationReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ReleaseResult> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PrefixMatchReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<RadixSchedulerHandoffReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<MappedFrontierReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<PromptModuleReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<SessionReuseReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);
template <>
Result<ExecutableReuseReceipt> decode(std::span<const uint8_t>, const DecodeLimits&);

}  // namespace kvrt::codec
