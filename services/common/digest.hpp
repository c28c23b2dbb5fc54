#pragma once
// SHA-256 digests and the canonical byte encoding they are computed over.
// Canonical means: the same logical value always yields the same bytes,
// independent of struct padding, platform endianness or container order.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvrt {

struct Sha256Digest {
  std::array<uint8_t, 32> bytes{};
  std::string hex() const;
  static bool from_hex(std::string_view hex, Sha256Digest& out);
  friend bool operator==(const Sha256Digest&, const Sha256Digest&) = default;
  friend auto operator<=>(const Sha256Digest&, const Sha256Digest&) = default;
};

Sha256Digest sha256(std::span<const uint8_t> data);
Sha256Digest sha256(std::string_view data);

// Appends typed, length-delimited fields. Every field carries a tag so that
// reordering or omitting fields changes the digest (no ambiguity between
// ("ab","c") and ("a","bc")). Integers are little-endian fixed width.
class CanonicalWriter {
 public:
  explicit CanonicalWriter(std::string_view domain);  // domain separation label
  CanonicalWriter& u8(std::string_view tag, uint8_t v);
  CanonicalWriter& u32(std::string_view tag, uint32_t v);
  CanonicalWriter& u64(std::string_view tag, uint64_t v);
  CanonicalWriter& i64(std::string_view tag, int64_t v);
  CanonicalWriter& str(std::string_view tag, std::string_view v);
  CanonicalWriter& bytes(std::string_view tag, std::span<const uint8_t> v);
  CanonicalWriter& digest(std::string_view tag, const Sha256Digest& d);
  // Opens/closes a nested list so that list boundaries are part of the encoding.
  CanonicalWriter& begin_list(std::string_view tag, uint64_t count);

  const std::string& buffer() const { return buf_; }
  Sha256Digest finish() const { return sha256(buf_); }

 private:
  void raw_tag(std::string_view tag, char type);
  void raw_u64(uint64_t v);
  std::string buf_;
};

}  // namespace kvrt
