#include "services/common/digest.hpp"

#include <openssl/evp.h>

#include "services/common/assert.hpp"
#include "services/common/hex.hpp"

namespace kvrt {

std::string Sha256Digest::hex() const { return to_hex(bytes); }

bool Sha256Digest::from_hex(std::string_view hex, Sha256Digest& out) { return kvrt::from_hex(hex, out.bytes); }

Sha256Digest sha256(std::span<const uint8_t> data) {
  Sha256Digest d;
  unsigned int len = 0;
  int rc = EVP_Digest(data.data(), data.size(), d.bytes.data(), &len, EVP_sha256(), nullptr);
  KVRT_ASSERT(rc == 1 && len == 32, "EVP_Digest(sha256) failed");
  return d;
}

Sha256Digest sha256(std::string_view data) {
  return sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

CanonicalWriter::CanonicalWriter(std::string_view domain) { str("domain", domain); }

void CanonicalWriter::raw_u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void CanonicalWriter::raw_tag(std::string_view tag, char type) {
  raw_u64(tag.size());
  buf_.append(tag);
  buf_.push_back(type);
}

CanonicalWriter& CanonicalWriter::u8(std::string_view tag, uint8_t v) {
  raw_tag(tag, 'b');
  buf_.push_back(static_cast<char>(v));
  return *this;
}
CanonicalWriter& CanonicalWriter::u32(std::string_view tag, uint32_t v) {
  raw_tag(tag, 'u');
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return *this;
}
CanonicalWriter& CanonicalWriter::u64(std::string_view tag, uint64_t v) {
  raw_tag(tag, 'U');
  raw_u64(v);
  return *this;
}
CanonicalWriter& CanonicalWriter::i64(std::string_view tag, int64_t v) {
  raw_tag(tag, 'I');
  raw_u64(static_cast<uint64_t>(v));
  return *this;
}
CanonicalWriter& CanonicalWriter::str(std::string_view tag, std::string_view v) {
  raw_tag(tag, 's');
  raw_u64(v.size());
  buf_.append(v);
  return *this;
}
CanonicalWriter& CanonicalWriter::bytes(std::string_view tag, std::span<const uint8_t> v) {
  raw_tag(tag, 'y');
  raw_u64(v.size());
  buf_.append(reinterpret_cast<const char*>(v.data()), v.size());
  return *this;
}
CanonicalWriter& CanonicalWriter::digest(std::string_view tag, const Sha256Digest& d) {
  raw_tag(tag, 'd');
  buf_.append(reinterpret_cast<const char*>(d.bytes.data()), d.bytes.size());
  return *this;
}
CanonicalWriter& CanonicalWriter::begin_list(std::string_view tag, uint64_t count) {
  raw_tag(tag, 'l');
  raw_u64(count);
  return *this;
}

}  // namespace kvrt
