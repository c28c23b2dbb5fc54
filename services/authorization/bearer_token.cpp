#include "services/authorization/bearer_token.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

namespace kvrt {
namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<BearerToken> BearerToken::generate() {
  BearerToken t;
  if (RAND_bytes(t.bytes_.data(), static_cast<int>(t.bytes_.size())) != 1)
    return make_error(ErrorCode::io, "the OpenSSL random generator could not produce a token", "token");
  return t;
}

Result<BearerToken> BearerToken::from_hex(std::string_view hex) {
  // The reason names the expected form only: a malformed token may still be
  // most of a real one, and errors end up in logs.
  const Error malformed =
      make_error(ErrorCode::authorization_unauthenticated, "a bearer token is 32 hex digits", "token");
  if (hex.size() != 2 * kBytes) return malformed;
  BearerToken t;
  for (size_t i = 0; i < kBytes; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return malformed;
    t.bytes_[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return t;
}

BearerToken::~BearerToken() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

Sha256Digest BearerToken::digest() const { return sha256(std::span<const uint8_t>(bytes_)); }

std::string BearerToken::reveal_hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kBytes);
  for (uint8_t b : bytes_) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

Result<std::string> random_secret_hex() {
  auto t = BearerToken::generate();
  if (!t.ok()) return t.error();
  return t->reveal_hex();
}

bool digests_equal_constant_time(const Sha256Digest& a, const Sha256Digest& b) {
  return CRYPTO_memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0;
}

}  // namespace kvrt
