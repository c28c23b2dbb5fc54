#pragma once
// BlockHash: the concrete key of one hash block of the prefix index (spec
// 0x07B). The hash family is part of identity: an index holds keys
// of exactly one family, fixed by its CacheLayoutManifest, so two families
// never meet in one table. SHA-256 fills all 32 bytes; XXH3-128 fills the
// first 16 (its canonical big-endian form) and leaves the rest zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "services/common/ids.hpp"

namespace kvrt {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  // The first 8 bytes as an integer: every family's output is uniform there,
  // so the digest table probes with it directly.
  uint64_t prefix64() const {
    uint64_t v;
    std::memcpy(&v, bytes.data(), sizeof v);
    return v;
  }
  std::string hex() const;  // 64 lower-case hex digits

  friend bool operator==(const BlockHash& a, const BlockHash& b) {
    return std::memcmp(a.bytes.data(), b.bytes.data(), 32) == 0;
  }
  friend auto operator<=>(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept { return static_cast<size_t>(h.prefix64()); }
};

}  // namespace kvrt
