#include "tools/ledger/exact_fraction.hpp"

#include <numeric>

#include "services/common/assert.hpp"

namespace kvrt {

ExactFraction ExactFraction::of(uint64_t n, uint64_t d) {
  KVRT_ASSERT(d != 0, "ExactFraction with a zero denominator");
  const uint64_t g = std::gcd(n, d);  // gcd(0, d) == d, so 0/d becomes 0/1
  return ExactFraction{n / g, d / g};
}

std::string ExactFraction::to_string() const {
  uint64_t d = denominator;
  while (d % 2 == 0) d /= 2;
  while (d % 5 == 0) d /= 5;
  if (d != 1) return std::to_string(numerator) + "/" + std::to_string(denominator);
  // Terminating decimal: long division ends after at most log2(denominator) digits.
  std::string out = std::to_string(numerator / denominator);
  unsigned __int128 rem = numerator % denominator;
  if (rem == 0) return out;
  out.push_back('.');
  while (rem != 0) {
    rem *= 10;
    out.push_back(static_cast<char>('0' + static_cast<int>(rem / denominator)));
    rem %= denominator;
  }
  return out;
}

}  // namespace kvrt
