// The codec's shared machinery: flat-array output, the bounded aligned reader,
// the Envelope checks, exception-to-Error mapping, common value types and
// the typed error message itself.
#include <capnp/serialize.h>

#include <string_view>

#include "schema/codec_support.hpp"

namespace kvrt::codec {
namespace detail {
namespace {

// A flat-array message starts with a segment table of (n/2 + 1) words for n
// segments; Cap'n Proto readers accept at most 512 segments, so 257 words
// bound the table. The traversal limit counts only message content.
constexpr uint64_t kSegmentTableWordsMax = 257;

const char* body_name(wire::Envelope::Which w) {
  switch (w) {
    case wire::Envelope::TYPED_ERROR: return "ErrorMessage";
    case wire::Envelope::CACHE_LAYOUT_MANIFEST: return "CacheLayoutManifest";
    case wire::Envelope::CACHE_COMPATIBILITY_MANIFEST: return "CacheCompatibilityManifest";
    case wire::Envelope::CACHE_ISOLATION_NAMESPACE: return "CacheIsolationNamespace";
    case wire::Envelope::PHYSICAL_BLOCK_HANDLE: return "PhysicalBlockHandle";
    case wire::Envelope::PHYSICAL_REF: return "PhysicalRef";
    case wire::Envelope::ALLOCATION_TXN: return "AllocationTxn";
    case wire::Envelope::ALLOCATION_RECEIPT: return "AllocationReceipt";
    case wire::Envelope::RELEASE_RESULT: return "ReleaseResult";
    case wire::Envelope::PREFIX_MATCH_RECEIPT: return "PrefixMatchReceipt";
    case wire::Envelope::RADIX_SCHEDULER_HANDOFF_RECEIPT: return "RadixSchedulerHandoffReceipt";
    case wire::Envelope::MAPPED_FRONTIER_RECEIPT: return "MappedFrontierReceipt";
    case wire::Envelope::PROMPT_MODULE_RECEIPT: return "PromptModuleReceipt";
    case wire::Envelope::SESSION_REUSE_RECEIPT: return "SessionReuseReceipt";
    case wire::Envelope::EXECUTABLE_REUSE_RECEIPT: return "ExecutableReuseReceipt";
  }
  return nullptr;  // a union discriminant this build does not know
}

}  // namespace

std::vector<uint8_t> to_bytes(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

unsigned list_size(size_t n) {
  KVRT_ASSERT(n < (size_t{1} << 29), "list of " + std::to_string(n) + " elements exceeds a Cap'n Proto list");
  return static_cast<unsigned>(n);
}

std::string to_string(const capnp::Text::Reader& t) { return std::string(t.begin(), t.end()); }

Status read_digest(ReadContext& ctx, const char* field, capnp::Data::Reader d, Sha256Digest& out) {
  if (d.size() != out.bytes.size())
    return make_error(ErrorCode::decode_failed,
                      ctx.field_path(field) + ": a SHA-256 digest is 32 bytes, got " + std::to_string(d.size()),
                      ctx.field_path(field));
  std::memcpy(out.bytes.data(), d.begin(), out.bytes.size());
  return Status::success();
}

void write(wire::PhysicalBlockHandle::Builder b, const PhysicalBlockHandle& v) {
  b.setPool(v.pool.value);
  b.setGroup(v.group.value);
  b.setBlock(v.block.value);
  b.setGeneration(v.generation.value);
}
PhysicalBlockHandle read(wire::PhysicalBlockHandle::Reader r) {
  return PhysicalBlockHandle{PoolId{r.getPool()}, CacheGroupId{r.getGroup()}, PhysicalBlockId{r.getBlock()},
                             BlockGeneration{r.getGeneration()}};
}

void write(wire::PhysicalRef::Builder b, const PhysicalRef& v) {
  b.setGroup(v.group.value);
  b.setPoolId(v.pool_id.value);
  b.setPoolGeneration(v.pool_generation.value);
  b.setBlock(v.block.value);
}
PhysicalRef read(wire::PhysicalRef::Reader r) {
  return PhysicalRef{CacheGroupId{r.getGroup()}, PoolId{r.getPoolId()}, PoolGeneration{r.getPoolGeneration()},
                     PhysicalBlockId{r.getBlock()}};
}

void write(wire::TokenInterval::Builder b, const TokenInterval& v) {
  b.setBegin(v.begin);
  b.setEnd(v.end);
}
TokenInterval read(wire::TokenInterval::Reader r) { return TokenInterval{r.getBegin(), r.getEnd()}; }

void write(wire::StateDigest::Builder b, const StateDigest& v) {
  b.setLo(v.lo);
  b.setHi(v.hi);
}
StateDigest read(wire::StateDigest::Reader r) { return StateDigest{r.getLo(), r.getHi()}; }

Status check_input_size(std::span<const uint8_t> bytes, const DecodeLimits& limits, const char* type) {
  if (bytes.empty())
    return make_error(ErrorCode::decode_failed, std::string(type) + ": empty input", type);
  if (bytes.size() % sizeof(capnp::word) != 0)
    return make_error(ErrorCode::decode_failed,
                      std::string(type) + ": " + std::to_string(bytes.size()) +
                          " bytes is not a whole number of 8-byte words",
                      type);
  // Rejecting before the copy keeps a hostile length from costing memory; the
  // traversal limit still bounds what is read from an accepted buffer.
  const uint64_t max_bytes = (limits.traversal_limit_words + kSegmentTableWordsMax) * sizeof(capnp::word);
  if (bytes.size() > max_bytes)
    return make_error(ErrorCode::message_too_large,
                      std::string(type) + ": " + std::to_string(bytes.size()) + " bytes exceed the reader limit of " +
                          std::to_string(max_bytes) + " bytes",
                      type);
  return Status::success();
}

kj::Array<capnp::word> aligned_copy(std::span<const uint8_t> bytes) {
  // FlatArrayMessageReader needs 8-byte aligned words; input may come from a
  // socket buffer or a byte vector at any address (STACK.md).
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  return words;
}

Status check_envelope(const capnp::FlatArrayMessageReader& reader, kj::ArrayPtr<const capnp::word> words,
                      wire::Envelope::Reader envelope, wire::Envelope::Which expected, const char* type) {
  if (reader.getEnd() != words.end()) {
    const auto used = static_cast<size_t>(reader.getEnd() - words.begin()) * sizeof(capnp::word);
    return make_error(ErrorCode::decode_failed,
                      std::string(type) + ": " + std::to_string(words.size() * sizeof(capnp::word) - used) +
                          " trailing bytes after a " + std::to_string(used) + "-byte message",
                      type);
  }
  if (envelope.getSchemaVersion() != wire::WIRE_SCHEMA_VERSION)
    return make_error(ErrorCode::decode_failed,
                      std::string(type) + ": wire schema version " + std::to_string(envelope.getSchemaVersion()) +
                          ", this build reads " + std::to_string(wire::WIRE_SCHEMA_VERSION),
                      "Envelope.schema_version");
  if (envelope.which() != expected) {
    const char* got = body_name(envelope.which());
    return make_error(ErrorCode::decode_failed,
                      std::string("expected a ") + type + " message, got " +
                          (got ? std::string("a ") + got : "unknown body " +
                                                               std::to_string(static_cast<unsigned>(envelope.which()))),
                      "Envelope.body");
  }
  return Status::success();
}

Error exception_error(const ReadContext& ctx, const kj::Exception& e) {
  // Cap'n Proto reports its ReaderOptions limits through these descriptions
  // (capnp/layout.c++ "Exceeded message traversal limit", "Message is too
  // deeply-nested"); everything else is malformed input.
  const std::string_view description(e.getDescription().cStr());
  const bool too_large = description.find("traversal limit") != std::string_view::npos ||
                         description.find("deeply-nested") != std::string_view::npos;
  return make_error(too_large ? ErrorCode::message_too_large : ErrorCode::decode_failed,
                    ctx.field_path() + ": " + std::string(description), ctx.field_path());
}

}  // namespace detail

using detail::ReadContext;

uint16_t wire_schema_version() { return wire::WIRE_SCHEMA_VERSION; }

std::vector<uint8_t> encode(const ErrorMessage& value) { return encode(value.error); }

std::vector<uint8_t> encode(const Error& value) {
  return detail::encode_envelope([&](wire::Envelope::Builder envelope) {
    auto b = envelope.initTypedError();
    b.setCode(static_cast<uint16_t>(value.code));
    b.setReason(detail::text(value.reason));
    b.setField(detail::text(value.field));
  });
}

template <>
Result<ErrorMessage> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_envelope<ErrorMessage>(
      bytes, limits, wire::Envelope::TYPED_ERROR, "ErrorMessage",
      [](ReadContext& ctx, wire::Envelope::Reader envelope) -> Result<ErrorMessage> {
        ctx.at("body");
        auto r = envelope.getTypedError();
        // Only codes this build knows are accepted: a client must be able to
        // switch on the code (error.cpp's to_string names every known code).
        const auto code = static_cast<ErrorCode>(r.getCode());
        if (to_string(code) == "unknown_error_code")
          return make_error(ErrorCode::unknown_enum,
                            "ErrorMessage.code: " + std::to_string(r.getCode()) + " is not a kvrt::ErrorCode",
                            "ErrorMessage.code");
        ErrorMessage out;
        out.error.code = code;
        ctx.at("reason");
        out.error.reason = detail::to_string(r.getReason());
        ctx.at("field");
        out.error.field = detail::to_string(r.getField());
        return out;
      });
}

template <>
Result<PhysicalBlockHandle> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_envelope<PhysicalBlockHandle>(
      bytes, limits, wire::Envelope::PHYSICAL_BLOCK_HANDLE, "PhysicalBlockHandle",
      [](ReadContext& ctx, wire::Envelope::Reader envelope) -> Result<PhysicalBlockHandle> {
        ctx.at("body");
        return detail::read(envelope.getPhysicalBlockHandle());
      });
}

std::vector<uint8_t> encode(const PhysicalBlockHandle& value) {
  return detail::encode_envelope(
      [&](wire::Envelope::Builder envelope) { detail::write(envelope.initPhysicalBlockHandle(), value); });
}

template <>
Result<PhysicalRef> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_envelope<PhysicalRef>(
      bytes, limits, wire::Envelope::PHYSICAL_REF, "PhysicalRef",
      [](ReadContext& ctx, wire::Envelope::Reader envelope) -> Result<PhysicalRef> {
        ctx.at("body");
        return detail::read(envelope.getPhysicalRef());
      });
}

std::vector<uint8_t> encode(const PhysicalRef& value) {
  return detail::encode_envelope(
      [&](wire::Envelope::Builder envelope) { detail::write(envelope.initPhysicalRef(), value); });
}

}  // namespace kvrt::codec
