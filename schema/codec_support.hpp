#pragma once
// Internal to schema/*.cpp (never included by cores or tests): the Envelope,
// the bounded aligned reader that turns every kj::Exception into a typed
// Error, and the per-field helpers shared by the codec translation units.
#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <variant>

#include "schema/codec.hpp"
#include "schema/common.capnp.h"
#include "schema/kvrt.capnp.h"

namespace kvrt::codec::detail {

// ---- encoding ---------------------------------------------------------------

// The message in flat-array framing (segment table, then the segments),
// written straight into the returned bytes: one copy of the content.
std::vector<uint8_t> to_bytes(capnp::MessageBuilder& message);

// This thread's reusable first segment for a message builder. An owner
// encodes one receipt after another on its thread; a fresh builder would
// allocate and zero its first segment each time (and a large one would be
// page-faulted in anew). The segment grows to the largest message this
// thread has encoded, up to kMaxWords; a larger message spills into segments
// the builder allocates itself. MallocMessageBuilder needs the segment zeroed
// and re-zeroes what it used in its destructor (capnp/message.h), so the
// builder must be destroyed before the lease. A nested encode on the same
// thread finds the segment taken and gets none.
class ScratchSegmentLease {
 public:
  static constexpr size_t kMaxWords = size_t{1} << 17;  // 1 MiB per thread [8-byte words]
  ScratchSegmentLease();
  ~ScratchSegmentLease();
  ScratchSegmentLease(const ScratchSegmentLease&) = delete;
  ScratchSegmentLease& operator=(const ScratchSegmentLease&) = delete;

  kj::ArrayPtr<capnp::word> words() const { return words_; }  // empty when taken
  // Grows the segment for the next message after one of `message_words`.
  // Call only after the builder using words() is destroyed.
  void fit(size_t message_words);

 private:
  kj::ArrayPtr<capnp::word> words_;
};

// Builds one Envelope at the current schema version; fill() initialises its body.
template <class Fill>
std::vector<uint8_t> encode_envelope(Fill&& fill) {
  ScratchSegmentLease scratch;
  std::optional<capnp::MallocMessageBuilder> message;  // destroyed before scratch
  if (scratch.words().size() > 0)
    message.emplace(scratch.words());
  else
    message.emplace();
  auto envelope = message->initRoot<wire::Envelope>();
  envelope.setSchemaVersion(wire::WIRE_SCHEMA_VERSION);
  fill(envelope);
  std::vector<uint8_t> bytes = to_bytes(*message);
  message.reset();
  scratch.fit(bytes.size() / sizeof(capnp::word));
  return bytes;
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
//
// A context is either a message's root ("AllocatorBatch") or one element of a
// list inside its parent, optionally through a named union member
// ("AllocatorBatch.ops[3].append"); fields read there are named below it
// ("AllocatorBatch.ops[3].append.rows"). Paths are only built when an error is
// reported: a child context is three pointers and an index, no allocation.
class ReadContext {
 public:
  explicit ReadContext(const char* type) : type_(type) {}
  ReadContext(const ReadContext& parent, const char* list_field, uint32_t index, const char* member = nullptr)
      : type_(parent.type_), parent_(&parent), list_field_(list_field), member_(member), index_(index) {}

  void at(const char* field) { field_ = field; }
  std::string path() const {
    if (!parent_) return type_;
    std::string p = parent_->path() + "." + list_field_ + "[" + std::to_string(index_) + "]";
    if (member_) (p += ".") += member_;
    return p;
  }
  std::string field_path() const { return field_ ? path() + "." + field_ : path(); }
  std::string field_path(const char* field) const { return path() + "." + field; }
  const char* type() const { return type_; }  // the root message's type

 private:
  const char* type_;
  const ReadContext* parent_ = nullptr;
  const char* list_field_ = nullptr;
  const char* member_ = nullptr;
  uint32_t index_ = 0;
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
    return make_error(
        ErrorCode::unknown_enum,
        ctx.field_path(field) + ": value " + std::to_string(raw) + " is not one of 0.." + std::to_string(max),
        ctx.field_path(field));
  out = static_cast<E>(raw);
  return Status::success();
}

template <class WireEnum, class E>
Status read_enum(ReadContext& ctx, const char* field, WireEnum raw, uint8_t max, E& out) {
  return read_enum(ctx, field, static_cast<uint16_t>(raw), max, out);
}

// Refuses a struct list whose elements are smaller on the wire than this
// schema's struct. Cap'n Proto lets a reader take such a list (smaller,
// older structs, or primitives read as structs) and charges a list of
// zero-sized elements only one word of traversal budget per element, so a
// few bytes can claim 2^23 elements, each decoding into a full C++ value
// (hundreds of bytes for a batch outcome). No encoder of this schema writes
// smaller elements, and kvrt's structs only ever grow (a field is added at a
// new ordinal, never removed), so this refuses nothing legitimate and keeps
// what a decode allocates proportional to the bytes actually sent.
template <class StructListReader>
Status check_element_size(const ReadContext& ctx, const char* field, StructListReader list) {
  if (list.size() == 0) return Status::success();
  using Struct = typename decltype(list[0])::Reads;
  constexpr size_t want_bytes = Struct::_capnpPrivate::dataWordSize * sizeof(capnp::word);
  constexpr size_t want_pointers = Struct::_capnpPrivate::pointerCount;
  const capnp::AnyStruct::Reader first(list[0]);  // every element of a list has one layout
  const size_t bytes = first.getDataSection().size();
  const size_t pointers = first.getPointerSection().size();
  if (bytes >= want_bytes && pointers >= want_pointers) return Status::success();
  return make_error(ErrorCode::decode_failed,
                    ctx.field_path(field) + ": elements of " + std::to_string(bytes) + " data bytes and " +
                        std::to_string(pointers) + " pointers are smaller than the schema's " +
                        std::to_string(want_bytes) + " and " + std::to_string(want_pointers),
                    ctx.field_path(field));
}

// A batch's list of variant items (operations or outcomes): each element is
// written by put(builder, alternative) (std::visit), and read back by
// read_one(ctx, index, reader, out) after the element-size check.
template <class StructListBuilder, class Variants, class Put>
void write_variant_list(StructListBuilder list, const Variants& items, Put&& put) {
  for (unsigned i = 0; i < list.size(); ++i)
    std::visit([&](const auto& alternative) { put(list[i], alternative); }, items[i]);
}
template <class StructListReader, class Variants, class ReadOne>
Status read_variant_list(ReadContext& ctx, const char* field, StructListReader list, Variants& out,
                         ReadOne&& read_one) {
  KVRT_TRY(check_element_size(ctx, field, list));
  out.reserve(list.size());
  for (unsigned i = 0; i < list.size(); ++i) KVRT_TRY(read_one(ctx, i, list[i], out.emplace_back()));
  return Status::success();
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
// The input as words: in place when it is 8-byte aligned (as any vector's
// heap buffer is), else copied into `copy` (FlatArrayMessageReader needs
// aligned words; input may sit at any address in a socket buffer).
kj::ArrayPtr<const capnp::word> aligned_words(std::span<const uint8_t> bytes, kj::Array<capnp::word>& copy);
Status check_envelope(const capnp::FlatArrayMessageReader& reader, kj::ArrayPtr<const capnp::word> words,
                      wire::Envelope::Reader envelope, wire::Envelope::Which expected, const char* type);
Error exception_error(const ReadContext& ctx, const kj::Exception& e);

// Reads element `index` of the parent's list `list_field` (through union
// member `member`, if any) under a child context. A Cap'n Proto exception is
// caught here, while the child still exists, so the typed error names the
// element ("AllocatorBatch.ops[3].append"); an exception reaching the root
// handler could only name the root's field. The try costs nothing unless
// something throws (table-based unwinding).
template <class Fn>
Status read_element(const ReadContext& parent, const char* list_field, uint32_t index, const char* member,
                    Fn&& read_child) {
  ReadContext child(parent, list_field, index, member);
  try {
    return read_child(child);
  } catch (const kj::Exception& e) {
    return exception_error(child, e);
  }
}

// Decodes bytes as an Envelope whose body must be `expected`, then runs
// read(ctx, envelope). Any kj::Exception (malformed input) or allocation
// failure becomes a typed Error; nothing escapes.
template <class T, class Read>
Result<T> decode_envelope(std::span<const uint8_t> bytes, const DecodeLimits& limits, wire::Envelope::Which expected,
                          const char* type, Read&& read_body) {
  if (auto s = check_input_size(bytes, limits, type); !s.ok()) return s.error();
  ReadContext ctx(type);
  try {
    kj::Array<capnp::word> copy;
    const kj::ArrayPtr<const capnp::word> words = aligned_words(bytes, copy);
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits.traversal_limit_words;
    options.nestingLimit = static_cast<int>(limits.nesting_limit);
    capnp::FlatArrayMessageReader reader(words, options);
    ctx.at("Envelope");
    auto envelope = reader.getRoot<wire::Envelope>();
    if (auto s = check_envelope(reader, words, envelope, expected, type); !s.ok()) return s.error();
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
