// Codec robustness (docs/architecture.md, wire schema): truncated, bit-flipped, overwritten
// and random bytes decode to a typed Error, or, where a corruption still forms
// a valid message, to a value that is stable under re-encoding; never a crash.
// Every random test prints its fixed seed on failure.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "tests/schema/codec_fixtures.hpp"

using namespace kvrt;
using kvrt::test::check_every_bit_flip;
using kvrt::test::check_random_overwrites;
using kvrt::test::decode_is_safe;
using kvrt::test::filled;
using kvrt::test::for_each_codec_type;

TEST_CASE("every strict prefix of a valid encoding is a typed error", "[codec]") {
  for_each_codec_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    const auto bytes = codec::encode(filled<T>());
    for (size_t len = 0; len < bytes.size(); ++len) {
      INFO("prefix length " << len << " of " << bytes.size());
      auto r = codec::decode<T>(std::span(bytes.data(), len));
      // The segment table declares the message length, so no strict prefix
      // can be a complete message.
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::decode_failed);
      CHECK_FALSE(r.error().field.empty());
    }
    // Appending a word is rejected as well: the reader must consume all input.
    auto longer = bytes;
    longer.resize(bytes.size() + 8, 0);
    auto r = codec::decode<T>(longer);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::decode_failed);
    CHECK(r.error().reason.find("trailing") != std::string::npos);
  });
}

TEST_CASE("every single-bit flip of a valid encoding decodes safely", "[codec]") {
  for_each_codec_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    check_every_bit_flip<T>(codec::encode(filled<T>()));
  });
}

TEST_CASE("random byte strings decode to typed errors, never a crash", "[codec]") {
  const uint64_t seed = 0x6b767274'636f6465ull;  // "kvrtcode"
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    INFO("string " << i);
    std::vector<uint8_t> bytes(rng() % 600);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for_each_codec_type([&](auto named) {
      using T = typename decltype(named)::type;
      INFO(named.name);
      decode_is_safe<T>(bytes);
    });
  }
}

TEST_CASE("random words behind a valid segment table decode safely", "[codec]") {
  // Uniform random bytes almost always fail at the segment table; here the
  // table is valid (1 to 4 segments that exactly span the input), so the
  // reader has to walk random pointers, far pointers, list tags and text.
  const uint64_t seed = 20240611;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 4000; ++i) {
    INFO("message " << i);
    const uint32_t segments = 1 + static_cast<uint32_t>(rng() % 4);
    const size_t table_words = segments / 2 + 1;
    const size_t content_words = segments + rng() % 64;
    std::vector<uint8_t> bytes((table_words + content_words) * 8);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::vector<uint32_t> table(table_words * 2, 0);
    table[0] = segments - 1;
    size_t left = content_words;
    for (uint32_t s = 0; s < segments; ++s) {
      const size_t size = s + 1 == segments ? left : 1 + rng() % (left - (segments - s - 1));
      table[1 + s] = static_cast<uint32_t>(size);
      left -= size;
    }
    std::memcpy(bytes.data(), table.data(), table_words * 8);
    for_each_codec_type([&](auto named) {
      using T = typename decltype(named)::type;
      INFO(named.name);
      decode_is_safe<T>(bytes);
    });
  }
}

TEST_CASE("randomly overwritten encodings decode safely", "[codec]") {
  const uint64_t seed = 77;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for_each_codec_type([&](auto named) {
    using T = typename decltype(named)::type;
    INFO(named.name);
    check_random_overwrites<T>(rng, 1500);
  });
}
