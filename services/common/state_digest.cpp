#include "services/common/state_digest.hpp"

#include <array>

#include "services/common/hex.hpp"

namespace kvrt {

std::string StateDigest::hex() const {
  // hi then lo, each most significant byte first.
  std::array<uint8_t, 16> bytes{};
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
    bytes[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
  }
  return to_hex(bytes);
}

}  // namespace kvrt
