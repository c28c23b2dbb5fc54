// The codec's shared machinery: flat-array output, the bounded aligned
// reader, the Envelope checks and the exception-to-Error mapping that every
// generated *_codec.cpp uses.
#include "schema/codec_support.hpp"

#include <capnp/serialize.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "services/common/assert.hpp"

namespace kvrt::codec {
namespace detail {
namespace {

// A flat-array message starts with a segment table of (n/2 + 1) words for n
// segments; Cap'n Proto readers accept at most 512 segments, so 257 words
// bound the table. The traversal limit counts only message content.
constexpr uint64_t kSegmentTableWordsMax = 257;

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

// Registered before main() by the generated files' MessageNames objects and
// only read afterwards, so it needs no lock.
std::map<uint64_t, const char*>& message_names() {
  static std::map<uint64_t, const char*> names;
  return names;
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

Status read_data(ReadContext& ctx, const char* field, capnp::Data::Reader d, Sha256Digest& out) {
  if (d.size() != out.bytes.size())
    return make_error(ErrorCode::decode_failed,
                      ctx.field_path(field) + ": a SHA-256 digest is 32 bytes, got " + std::to_string(d.size()),
                      ctx.field_path(field));
  std::memcpy(out.bytes.data(), d.begin(), out.bytes.size());
  return Status::success();
}

Error unknown_kind(const ReadContext& ctx, const char* type, unsigned which) {
  return make_error(ErrorCode::unknown_enum, ctx.path() + ": unknown " + type + " kind " + std::to_string(which),
                    ctx.path());
}

Error unknown_member(const ReadContext& ctx, const char* field, unsigned which) {
  return make_error(ErrorCode::unknown_enum, ctx.field_path(field) + ": unknown union member " + std::to_string(which),
                    ctx.field_path(field));
}

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
  // socket buffer or a byte vector at any address. The reader never writes,
  // so aligned input is read where it lies.
  const size_t n = bytes.size() / sizeof(capnp::word);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) == 0)
    return kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(bytes.data()), n);
  copy = kj::heapArray<capnp::word>(n);
  std::memcpy(copy.begin(), bytes.data(), bytes.size());
  return copy.asPtr();
}

Status check_envelope(const capnp::FlatArrayMessageReader& reader, kj::ArrayPtr<const capnp::word> words,
                      wire::Envelope::Reader envelope, uint64_t expected_body, const char* type) {
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
  if (envelope.getBodyType() != expected_body) {
    const char* got = MessageNames::find(envelope.getBodyType());
    return make_error(
        ErrorCode::decode_failed,
        std::string("expected a ") + type + " message, got " +
            (got ? std::string("a ") + got : "unknown body type " + std::to_string(envelope.getBodyType())),
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

MessageNames::MessageNames(std::initializer_list<std::pair<uint64_t, const char*>> names) {
  for (const auto& [id, name] : names) message_names().emplace(id, name);
}

const char* MessageNames::find(uint64_t body_type) {
  auto it = message_names().find(body_type);
  return it == message_names().end() ? nullptr : it->second;
}

}  // namespace detail

uint16_t wire_schema_version() { return wire::WIRE_SCHEMA_VERSION; }

}  // namespace kvrt::codec
