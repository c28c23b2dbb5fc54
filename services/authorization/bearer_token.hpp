#pragma once
// Bearer tokens of worker principals (spec 0x0CE "Authorization Before
// Lookup": authenticate principal first). A token is 128 random bits issued
// by the node at start-up (or whose SHA-256 an operator put in the config).
//
// Hygiene (0x0CE "Telemetry Hygiene", docs/architecture.md): the authority stores only
// SHA-256 digests of tokens; a raw token is never logged, never a metric label
// and never part of an error reason. BearerToken therefore has no stream
// operator and no to_string; reveal_hex() exists only to hand a freshly issued
// token to its worker once. Comparison is on digests, in constant time.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class BearerToken {
 public:
  static constexpr size_t kBytes = 16;  // 128 bits

  // 128 bits from OpenSSL's CSPRNG; ErrorCode::io if it cannot be seeded.
  static Result<BearerToken> generate();
  // Exactly 32 hex digits. The error never quotes the input.
  static Result<BearerToken> from_hex(std::string_view hex);

  BearerToken(const BearerToken&) = default;
  BearerToken& operator=(const BearerToken&) = default;
  ~BearerToken();  // wipes the bytes

  // SHA-256 of the 16 token bytes: the only form the authority keeps.
  Sha256Digest digest() const;
  // 32 lowercase hex digits, for handing the token to its worker once.
  std::string reveal_hex() const;

 private:
  BearerToken() = default;
  std::array<uint8_t, kBytes> bytes_{};
};

// 128 bits from OpenSSL's CSPRNG as 32 lowercase hex digits: the cache salt
// a namespace gets when its configuration names none (0x01A "unguessable
// cache salt"). ErrorCode::io if the generator cannot be seeded.
Result<std::string> random_secret_hex();

// Equality of two digests whose running time does not depend on where they
// first differ (OpenSSL CRYPTO_memcmp).
bool digests_equal_constant_time(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace kvrt
