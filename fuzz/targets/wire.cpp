// Every Cap'n Proto message kind the node or a worker decodes. The first
// byte picks the type (its low seven bits, modulo the count, index
// fuzz/wire_types.hpp) and where the envelope is read: where it lies, one
// byte into the input, as from a socket buffer (misaligned: the codec copies
// it), or from an aligned copy (read in place; bit 7 set). The rest is the
// envelope. The codec's contract (schema/codec.hpp): untrusted bytes decode
// to a value or to a typed decode error naming a field, and a decoded value
// is stable under re-encoding: decode(encode(x)) == x, and encode(x) is a
// fixpoint.
#include <span>
#include <vector>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/wire_types.hpp"

namespace {

template <class T>
void decode_one(std::span<const uint8_t> bytes, const char* name) {
  kvrt::Result<T> value = kvrt::codec::decode<T>(bytes);
  if (!value.ok()) {
    const kvrt::Error& e = value.error();
    KVRT_FUZZ_TYPED_ERROR(e);
    KVRT_FUZZ_REQUIRE(e.code == kvrt::ErrorCode::decode_failed || e.code == kvrt::ErrorCode::message_too_large ||
                          e.code == kvrt::ErrorCode::unknown_enum,
                      std::string(name) + ": " + e.describe());
    KVRT_FUZZ_REQUIRE(!e.field.empty(), std::string(name) + ": " + e.describe());
    return;
  }
  const std::vector<uint8_t> encoded = kvrt::codec::encode(*value);
  kvrt::Result<T> again = kvrt::codec::decode<T>(encoded);
  KVRT_FUZZ_REQUIRE(again.ok(), std::string(name) + ": " + again.error().describe());
  KVRT_FUZZ_REQUIRE(*again == *value, name);
  KVRT_FUZZ_REQUIRE(kvrt::codec::encode(*again) == encoded, name);
}

}  // namespace

int kvrt_fuzz_wire(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t pick = (data[0] & 0x7f) % kvrt::fuzz::kWireTypeCount;
  std::vector<uint8_t> aligned;
  std::span<const uint8_t> bytes(data + 1, size - 1);
  if ((data[0] & 0x80) != 0) {
    aligned.assign(bytes.begin(), bytes.end());  // a vector's buffer is 8-byte aligned
    bytes = aligned;
  }
  size_t index = 0;
  kvrt::fuzz::for_each_wire_type([&](auto type) {
    if (index++ == pick) decode_one<typename decltype(type)::type>(bytes, type.name);
  });
  return 0;
}
