#include "services/authorization/bearer_token.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "services/common/hex.hpp"

namespace kvrt {
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
  BearerToken t;
  if (!kvrt::from_hex(hex, t.bytes_)) return malformed;
  return t;
}

BearerToken::~BearerToken() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

Sha256Digest BearerToken::digest() const { return sha256(std::span<const uint8_t>(bytes_)); }

std::string BearerToken::reveal_hex() const { return to_hex(bytes_); }

Result<std::string> random_secret_hex() {
  auto t = BearerToken::generate();
  if (!t.ok()) return t.error();
  return t->reveal_hex();
}

bool digests_equal_constant_time(const Sha256Digest& a, const Sha256Digest& b) {
  return CRYPTO_memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0;
}

}  // namespace kvrt
