#pragma once
// Editing encoded messages for the codec tests: re-open an encoding with the
// generated Cap'n Proto classes, change what a correct writer never would,
// and check that decoding answers a typed decode error.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "schema/codecs.hpp"
#include "schema/kvrt.capnp.h"
#include "tests/schema/codec_fixtures.hpp"

namespace kvrt::test {

// Re-opens an encoded message for editing with the generated classes, applies
// edit(envelope) and serialises the result.
template <class Edit>
std::vector<uint8_t> edited(const std::vector<uint8_t>& bytes, Edit&& edit) {
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder message;
  message.setRoot(reader.getRoot<wire::Envelope>());
  edit(message.getRoot<wire::Envelope>());
  auto flat = capnp::messageToFlatArray(message);
  auto out = flat.asBytes();
  return std::vector<uint8_t>(out.begin(), out.end());
}

template <class T>
Error decode_error(const std::vector<uint8_t>& bytes) {
  auto r = codec::decode<T>(bytes);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().describe());
  CHECK(is_decode_error(r.error().code));
  return r.error();
}

}  // namespace kvrt::test
