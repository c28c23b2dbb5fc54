#include "services/common/state_digest.hpp"

namespace kvrt {

std::string StateDigest::hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[i] = kHex[(hi >> (60 - 4 * i)) & 0xF];
    out[16 + i] = kHex[(lo >> (60 - 4 * i)) & 0xF];
  }
  return out;
}

}  // namespace kvrt
