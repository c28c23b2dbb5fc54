#pragma once
// Internal to the codec (schema/*.cpp and the generated *_codec.cpp; never
// included by cores or tests): the Envelope, the bounded aligned reader that
// turns every kj::Exception into a typed Error, the ReadContext that names
// the field being read, and the per-field helpers generated code calls.
#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema/codec.hpp"
#include "schema/kvrt.capnp.h"
#include "services/common/digest.hpp"

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

// Builds one Envelope at the current schema version whose body is a `Body`
// (a generated Cap'n Proto struct); fill(body builder) writes it.
template <class Body, class Fill>
std::vector<uint8_t> encode_envelope(Fill&& fill) {
  ScratchSegmentLease scratch;
  std::optional<capnp::MallocMessageBuilder> message;  // destroyed before scratch
  if (scratch.words().size() > 0)
    message.emplace(scratch.words());
  else
    message.emplace();
  auto envelope = message->initRoot<wire::Envelope>();
  envelope.setSchemaVersion(wire::WIRE_SCHEMA_VERSION);
  envelope.setBodyType(capnp::typeId<Body>());
  fill(envelope.getBody().template initAs<Body>());
  std::vector<uint8_t> bytes = to_bytes(*message);
  message.reset();
  scratch.fit(bytes.size() / sizeof(capnp::word));
  return bytes;
}

// Cap'n Proto lists hold at most 2^29 - 1 elements; a longer C++ list is a
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
// A context is a message's root ("AllocatorBatch"), one element of a list of
// its parent ("AllocatorBatch.ops[3]"), or a member of its parent: a union
// member or a struct field ("AllocatorBatch.ops[3].append"). Fields read
// there are named below it ("AllocatorBatch.ops[3].append.rows"). Paths are
// only built when an error is reported: a child context is a few pointers
// and an index, no allocation.
class ReadContext {
 public:
  explicit ReadContext(const char* type) : type_(type) {}
  // An element of the parent's list `list_field`.
  ReadContext(const ReadContext& parent, const char* list_field, uint32_t index)
      : type_(parent.type_), parent_(&parent), name_(list_field), index_(index), indexed_(true) {}
  // A member of the parent (a union member or a struct-valued field).
  ReadContext(const ReadContext& parent, const char* member) : type_(parent.type_), parent_(&parent), name_(member) {}

  void at(const char* field) { field_ = field; }
  // Appended piece by piece: GCC 12 reports a false -Wrestrict inside
  // std::string's operator+ chains (GCC bug 105329).
  std::string path() const {
    if (!parent_) return type_;
    std::string p = parent_->path();
    if (*name_ != '\0') {  // an element of a list of lists has no name of its own
      p += '.';
      p += name_;
    }
    if (indexed_) {
      p += '[';
      p += std::to_string(index_);
      p += ']';
    }
    return p;
  }
  std::string field_path() const { return field_ ? field_path(field_) : path(); }
  std::string field_path(const char* field) const {
    std::string p = path();
    if (*field != '\0') {
      p += '.';
      p += field;
    }
    return p;
  }
  const char* type() const { return type_; }  // the root message's type

 private:
  const char* type_;
  const ReadContext* parent_ = nullptr;
  const char* name_ = nullptr;
  uint32_t index_ = 0;
  bool indexed_ = false;
  const char* field_ = nullptr;
};

std::string to_string(const capnp::Text::Reader& t);

Error exception_error(const ReadContext& ctx, const kj::Exception& e);

// Validates an enum read from the wire: Cap'n Proto hands back any 16-bit
// value, including ones this build does not know. `valid` is the generated
// check of the enum's declared values.
template <class E>
Status read_enum(ReadContext& ctx, const char* field, uint16_t raw, bool (*valid)(uint16_t), E& out) {
  if (!valid(raw))
    return make_error(ErrorCode::unknown_enum,
                      ctx.field_path(field) + ": value " + std::to_string(raw) + " is not one this build knows",
                      ctx.field_path(field));
  out = static_cast<E>(raw);
  return Status::success();
}

// A union discriminant this build does not know: at a variant element
// (the context itself) or at a union group field.
Error unknown_kind(const ReadContext& ctx, const char* type, unsigned which);
Error unknown_member(const ReadContext& ctx, const char* field, unsigned which);

// A digest travels as Data of exactly 32 bytes.
Status read_data(ReadContext& ctx, const char* field, capnp::Data::Reader d, Sha256Digest& out);

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

// Reads element `index` of the parent's list `list_field` under a child
// context. A Cap'n Proto exception is caught here, while the child still
// exists, so the typed error names the element ("AllocatorBatch.ops[3]");
// an exception reaching the root handler could only name the root's field.
// The try costs nothing unless something throws (table-based unwinding).
template <class Fn>
Status read_element(const ReadContext& parent, const char* list_field, uint32_t index, Fn&& read_child) {
  ReadContext child(parent, list_field, index);
  try {
    return read_child(child);
  } catch (const kj::Exception& e) {
    return exception_error(child, e);
  }
}

// Reads a member (union member or struct-valued field) under a child context.
template <class Fn>
Status read_member(const ReadContext& parent, const char* member, Fn&& read_child) {
  ReadContext child(parent, member);
  try {
    return read_child(child);
  } catch (const kj::Exception& e) {
    return exception_error(child, e);
  }
}

// Pre-checks, the aligned copy and the envelope checks shared by every decode.
Status check_input_size(std::span<const uint8_t> bytes, const DecodeLimits& limits, const char* type);
// The input as words: in place when it is 8-byte aligned (as any vector's
// heap buffer is), else copied into `copy` (FlatArrayMessageReader needs
// aligned words; input may sit at any address in a socket buffer).
kj::ArrayPtr<const capnp::word> aligned_words(std::span<const uint8_t> bytes, kj::Array<capnp::word>& copy);
Status check_envelope(const capnp::FlatArrayMessageReader& reader, kj::ArrayPtr<const capnp::word> words,
                      wire::Envelope::Reader envelope, uint64_t expected_body, const char* type);

// The message names of every generated file, by body type id, for "expected
// a PrefixBatch message, got an AllocatorBatch". Each generated *_codec.cpp
// defines one MessageNames object; its constructor registers them.
class MessageNames {
 public:
  MessageNames(std::initializer_list<std::pair<uint64_t, const char*>> names);
  static const char* find(uint64_t body_type);  // nullptr: not a kvrt message
};

// Decodes bytes as an Envelope whose body must be a `Body`, then runs
// read_body(ctx, body reader, out) on a default-constructed T. Any
// kj::Exception (malformed input) or allocation failure becomes a typed
// Error; nothing escapes.
template <class T, class Body, class ReadBody>
Result<T> decode_envelope(std::span<const uint8_t> bytes, const DecodeLimits& limits, const char* type,
                          ReadBody&& read_body) {
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
    if (auto s = check_envelope(reader, words, envelope, capnp::typeId<Body>(), type); !s.ok()) return s.error();
    ctx.at("body");
    T out;
    if (auto s = read_body(ctx, envelope.getBody().template getAs<Body>(), out); !s.ok()) return s.error();
    return out;
  } catch (const kj::Exception& e) {
    return exception_error(ctx, e);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::message_too_large, std::string(type) + ": out of memory while decoding",
                      ctx.field_path());
  }
}

}  // namespace kvrt::codec::detail
