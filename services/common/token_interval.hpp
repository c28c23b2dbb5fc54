#pragma once
// Half-open token interval [begin, end) in logical token positions [tokens].
// Used by receipts that name the rows they cover (0x08G suffix_interval,
// 0x0CC covered interval [0, H), 0x0CD covered_interval).
#include <cstdint>

namespace kvrt {

struct TokenInterval {
  uint32_t begin = 0;  // first covered token position [tokens]
  uint32_t end = 0;    // one past the last covered position [tokens]; begin <= end

  uint32_t length() const { return end >= begin ? end - begin : 0; }  // [tokens]
  friend bool operator==(const TokenInterval&, const TokenInterval&) = default;
};

}  // namespace kvrt
