#pragma once
// Internal to schema/*.cpp (never included by cores or tests): the Envelope,
// the bounded aligned reader that turns every kj::Exception into a typed
// Error, and the per-field helpers shared by the codec translation units.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "schema/codec.hpp"
#include "schema/common.capnp.h"
#include "schema/kvrt.capnp.h"

namespace kvrt::codec::detail {

// ---- encoding ---------------------------------------------------------------

std::vector<uint8_t> to_bytes(capnp::MessageBuilder& message);

// Builds one Envelope at the current schema version; fill() initialises its body.
template <class Fill>
std::vector<uint8_t> encode_envelope(Fill&& fill) {
  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<wire::Envelope>();
  envelope.setSchemaVersion(wire::WIRE_SCHEMA_VERSION);
  fill(envelope);
  return to_bytes(message);
}

// Cap'n Proto lists hold at most 2^29 - 1 elements; a longer core list is a
// kvrt bug (no legitimate receipt comes near it), not a caller error.
unsigned list_size(size_t n);

inline capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
inline capnp::Data::Reader data(const Sha256Digest& d) { return capnp::Data::Reader(d.bytes.data(), d.bytes.size()); }

// ---- decoding ---------------------------------------------------------------

// Tracks which field is being read, so that an exception thrown by a Cap'n
// Proto getter (truncation, out-of-bounds pointer, traversal limit) names it.
// Data fields never throw (out-of-range data reads as zero); every pointer
// field is preceded by at().
class ReadContext {
 public:
  explicit ReadContext(const char* type) : type_(type) {}
  void at(const char* field) { field_ = field; }
  std::string field_path() const { return field_ ? std::string(type_) + "." + field_ : std::string(type_); }
  std::string field_path(const char* field) const { return std::string(type_) + "." + field; }
  const char* type() const { return type_; }

 private:
  const char* type_;
  const char* field_ = nullptr;
};

std::string to_string(const capnp::Text::Reader& t);

// A digest travels as Data of exactly 32 bytes.
Status read_digest(ReadContext& ctx, const char* field, capnp::Data::Reader d, Sha256Digest& out);

// Validates an enum read from the wire: Cap'n Proto hands back any 16-bit
// value, including ones this build does not know.
template <class E>
Status read_enum(ReadContext& ctx, const char* field, uint16_t raw, uint8_t max, E& out) {
  if (raw > max)
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path(field) + ": value " + std::to_string(raw) + " is not one of 0.." +
                          std::to_string(max),
                      ctx.field_path(field));
  out = static_cast<E>(raw);
  return Status::success();
}

template <class WireEnum, class E>
Status read_enum(ReadContext& ctx, const char* field, WireEnum raw, uint8_t max, E& out) {
  return read_enum(ctx, field, static_cast<uint16_t>(raw), max, out);
}

// Common value types (codec_common.cpp).
void write(wire::PhysicalBlockHandle::Builder b, const PhysicalBlockHandle& v);
PhysicalBlockHandle read(wire::PhysicalBlockHandle::Reader r);
void write(wire::PhysicalRef::Builder b, const PhysicalRef& v);
PhysicalRef read(wire::PhysicalRef::Reader r);
void write(wire::TokenInterval::Builder b, const TokenInterval& v);
TokenInterval read(wire::TokenInterval::Reader r);
void write(wire::StateDigest::Builder b, const StateDigest& v);
StateDigest read(wire::StateDigest::Reader r);

template <class ListBuilder, class T>
void write_handles(ListBuilder list, const std::vector<T>& values) {
  for (unsigned i = 0; i < values.size(); ++i) write(list[i], values[i]);
}
template <class ListReader>
auto read_all(ListReader list) {
  std::vector<decltype(read(list[0]))> out;
  out.reserve(list.size());
  for (auto item : list) out.push_back(read(item));
  return out;
}

// Cap'n Proto list iterators are not standard iterators; copy element-wise.
template <class ListReader>
std::vector<uint32_t> read_u32s(ListReader list) {
  std::vector<uint32_t> out;
  out.reserve(list.size());
  for (uint32_t v : list) out.push_back(v);
  return out;
}

// Pre-checks, the aligned copy and the exception boundary shared by every decode<T>.
Status check_input_size(std::span<const uint8_t> bytes, const DecodeLimits& limits, const char* type);
kj::Array<capnp::word> aligned_copy(std::span<const uint8_t> bytes);
Status check_envelope(const capnp::FlatArrayMessageReader& reader, kj::ArrayPtr<const capnp::word> words,
                      wire::Envelope::Reader envelope, wire::Envelope::Which expected, const char* type);
Error exception_error(const ReadContext& ctx, const kj::Exception& e);

// Decodes bytes as an Envelope whose body must be `expected`, then runs
// read(ctx, envelope). Any kj::Exception (malformed input) or allocation
// failure becomes a typed Error; nothing escapes.
template <class T, class Read>
Result<T> decode_envelope(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                          wire::Envelope::Which expected, const char* type, Read&& read_body) {
  if (auto s = check_input_size(bytes, limits, type); !s.ok()) return s.error();
  ReadContext ctx(type);
  try {
    kj::Array<capnp::word> words = aligned_copy(bytes);
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits.traversal_limit_words;
    options.nestingLimit = static_cast<int>(limits.nesting_limit);
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    ctx.at("Envelope");
    auto envelope = reader.getRoot<wire::Envelope>();
    if (auto s = check_envelope(reader, words.asPtr(), envelope, expected, type); !s.ok()) return s.error();
    return read_body(ctx, envelope);
  } catch (const kj::Exception& e) {
    return exception_error(ctx, e);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::message_too_large, std::string(type) + ": out of memory while decoding",
                      ctx.field_path());
  }
}

// decode_envelope for the common case: read_body(ctx, envelope, out) fills a
// default-constructed T from the expected body and returns a Status.
template <class T, class ReadBody>
Result<T> decode_body(std::span<const uint8_t> bytes, const DecodeLimits& limits, wire::Envelope::Which expected,
                      const char* type, ReadBody read_body) {
  return decode_envelope<T>(bytes, limits, expected, type,
                            [&](ReadContext& ctx, wire::Envelope::Reader envelope) -> Result<T> {
                              ctx.at("body");
                              T out;
                              if (auto s = read_body(ctx, envelope, out); !s.ok()) return s.error();
                              return out;
                            });
}

}  // namespace kvrt::codec::detail
