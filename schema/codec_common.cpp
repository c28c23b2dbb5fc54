// The codec's shared machinery: flat-array output, the bounded aligned reader,
// the Envelope checks, exception-to-Error mapping, common value types and
// the typed error message itself.
#include <capnp/serialize.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "schema/codec_parts.hpp"

namespace kvrt::codec {
namespace detail {
namespace {

// A flat-array message starts with a segment table of (n/2 + 1) words for n
// segments; Cap'n Proto readers accept at most 512 segments, so 257 words
// bound the table. The traversal limit counts only message content.
constexpr uint64_t kSegmentTableWordsMax = 257;

const char* body_name(wire::Envelope::Which w) {
  switch (w) {
    case wire::Envelope::TYPED_ERROR:
      return "ErrorMessage";
    case wire::Envelope::CACHE_LAYOUT_MANIFEST:
      return "CacheLayoutManifest";
    case wire::Envelope::CACHE_COMPATIBILITY_MANIFEST:
      return "CacheCompatibilityManifest";
    case wire::Envelope::CACHE_ISOLATION_NAMESPACE:
      return "CacheIsolationNamespace";
    case wire::Envelope::PHYSICAL_BLOCK_HANDLE:
      return "PhysicalBlockHandle";
    case wire::Envelope::PHYSICAL_REF:
      return "PhysicalRef";
    case wire::Envelope::ALLOCATION_TXN:
      return "AllocationTxn";
    case wire::Envelope::ALLOCATION_RECEIPT:
      return "AllocationReceipt";
    case wire::Envelope::RELEASE_RESULT:
      return "ReleaseResult";
    case wire::Envelope::PREFIX_MATCH_RECEIPT:
      return "PrefixMatchReceipt";
    case wire::Envelope::RADIX_SCHEDULER_HANDOFF_RECEIPT:
      return "RadixSchedulerHandoffReceipt";
    case wire::Envelope::MAPPED_FRONTIER_RECEIPT:
      return "MappedFrontierReceipt";
    case wire::Envelope::PROMPT_MODULE_RECEIPT:
      return "PromptModuleReceipt";
    case wire::Envelope::SESSION_REUSE_RECEIPT:
      return "SessionReuseReceipt";
    case wire::Envelope::EXECUTABLE_REUSE_RECEIPT:
      return "ExecutableReuseReceipt";
    case wire::Envelope::ALLOCATOR_BATCH:
      return "AllocatorBatch";
    case wire::Envelope::ALLOCATOR_BATCH_RECEIPT:
      return "AllocatorBatchReceipt";
    case wire::Envelope::PREFIX_BATCH:
      return "PrefixBatch";
    case wire::Envelope::PREFIX_BATCH_RECEIPT:
      return "PrefixBatchReceipt";
    case wire::Envelope::HELLO_REQUEST:
      return "HelloRequest";
    case wire::Envelope::SESSION_RECEIPT:
      return "SessionReceipt";
    case wire::Envelope::AUTHORIZE_REQUEST:
      return "AuthorizeRequest";
    case wire::Envelope::NAMESPACE_GRANT_RECEIPT:
      return "NamespaceGrantReceipt";
    case wire::Envelope::OWNER_STATS:
      return "OwnerStats";
    case wire::Envelope::MAPPER_BATCH:
      return "MapperBatch";
    case wire::Envelope::MAPPER_BATCH_RECEIPT:
      return "MapperBatchReceipt";
    case wire::Envelope::EXECUTE_BATCH:
      return "ExecuteBatch";
    case wire::Envelope::EXECUTE_BATCH_RECEIPT:
      return "ExecuteBatchReceipt";
    case wire::Envelope::REUSE_BATCH:
      return "ReuseBatch";
    case wire::Envelope::REUSE_BATCH_RECEIPT:
      return "ReuseBatchReceipt";
  }
  return nullptr;  // a union discriminant this build does not know
}

}  // namespace

std::vector<uint8_t> to_bytes(capnp::MessageBuilder& message) {
  // Flat-array framing (Cap'n Proto encoding spec, "Serialization over a
  // stream"): uint32 segment count - 1, uint32 size of each segment [words],
  // zero-padded to a whole word; then the segments. Little-endian, as the
  // host (Cap'n Proto's own accessors assume the same here).
  const auto segments = message.getSegmentsForOutput();
  KVRT_ASSERT(segments.size() > 0, "a message builder with no segment");
  const size_t table_words = segments.size() / 2 + 1;
  size_t words = table_words;
  for (const auto& segment : segments) words += segment.size();
  std::vector<uint8_t> out(words * sizeof(capnp::word));
  uint8_t* at = out.data();
  const auto put_u32 = [&](size_t v) {
    const uint32_t u = static_cast<uint32_t>(v);
    std::memcpy(at, &u, sizeof(u));
    at += sizeof(u);
  };
  put_u32(segments.size() - 1);
  for (const auto& segment : segments) put_u32(segment.size());
  at = out.data() + table_words * sizeof(capnp::word);  // past the padding (zero already)
  for (const auto& segment : segments) {
    std::memcpy(at, segment.begin(), segment.size() * sizeof(capnp::word));
    at += segment.size() * sizeof(capnp::word);
  }
  return out;
}

namespace {

struct ThreadScratch {
  kj::Array<capnp::word> words;  // zeroed whenever not leased
  bool leased = false;
};
thread_local ThreadScratch thread_scratch;

kj::Array<capnp::word> zeroed_words(size_t n) {
  auto words = kj::heapArray<capnp::word>(n);
  std::memset(words.begin(), 0, n * sizeof(capnp::word));
  return words;
}

}  // namespace

ScratchSegmentLease::ScratchSegmentLease() {
  if (thread_scratch.leased) return;
  thread_scratch.leased = true;
  if (thread_scratch.words.size() == 0) thread_scratch.words = zeroed_words(capnp::SUGGESTED_FIRST_SEGMENT_WORDS);
  words_ = thread_scratch.words.asPtr();
}

ScratchSegmentLease::~ScratchSegmentLease() {
  if (words_.size() > 0) thread_scratch.leased = false;
}

void ScratchSegmentLease::fit(size_t message_words) {
  if (words_.size() == 0 || message_words <= words_.size() || words_.size() >= kMaxWords) return;
  size_t grown = words_.size();
  while (grown < message_words && grown < kMaxWords) grown *= 2;
  thread_scratch.words = zeroed_words(std::min(grown, kMaxWords));
  words_ = thread_scratch.words.asPtr();
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

void write(wire::TypedError::Builder b, const Error& v) {
  b.setCode(static_cast<uint16_t>(v.code));
  b.setReason(text(v.reason));
  b.setField(text(v.field));
}

Status read(ReadContext& ctx, wire::TypedError::Reader r, Error& out) {
  // Only codes this build knows are accepted: a client must be able to
  // switch on the code (error.cpp's to_string names every known code).
  const auto code = static_cast<ErrorCode>(r.getCode());
  if (kvrt::to_string(code) == "unknown_error_code")
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path("code") + ": " + std::to_string(r.getCode()) + " is not a kvrt::ErrorCode",
                      ctx.field_path("code"));
  out.code = code;
  ctx.at("reason");
  out.reason = to_string(r.getReason());
  ctx.at("field");
  out.field = to_string(r.getField());
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
  if (bytes.empty()) return make_error(ErrorCode::decode_failed, std::string(type) + ": empty input", type);
  if (bytes.size() % sizeof(capnp::word) != 0)
    return make_error(
        ErrorCode::decode_failed,
        std::string(type) + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of 8-byte words", type);
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

kj::ArrayPtr<const capnp::word> aligned_words(std::span<const uint8_t> bytes, kj::Array<capnp::word>& copy) {
  // FlatArrayMessageReader needs 8-byte aligned words; input may come from a
  // socket buffer or a byte vector at any address (STACK.md). The reader
  // never writes, so aligned input is read where it lies.
  const size_t n = bytes.size() / sizeof(capnp::word);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) == 0)
    return kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(bytes.data()), n);
  copy = kj::heapArray<capnp::word>(n);
  std::memcpy(copy.begin(), bytes.data(), bytes.size());
  return copy.asPtr();
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
    return make_error(
        ErrorCode::decode_failed,
        std::string("expected a ") + type + " message, got " +
            (got ? std::string("a ") + got : "unknown body " + std::to_string(static_cast<unsigned>(envelope.which()))),
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
  return detail::encode_envelope(
      [&](wire::Envelope::Builder envelope) { detail::write(envelope.initTypedError(), value); });
}

template <>
Result<ErrorMessage> decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  return detail::decode_body<ErrorMessage>(bytes, limits, wire::Envelope::TYPED_ERROR, "ErrorMessage",
                                           [](ReadContext& ctx, wire::Envelope::Reader envelope, ErrorMessage& out) {
                                             return detail::read(ctx, envelope.getTypedError(), out.error);
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
