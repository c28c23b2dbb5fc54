#pragma once
// ExactFraction: a non-negative rational kept in lowest terms. The ledgers of
// spec 0x02F and 0x02G produce ratios that are not whole numbers (F_ext = 1/3,
// (P-1)/2 = 7.5 slots); keeping them exact lets tests compare with the spec's
// arithmetic without a floating-point tolerance.
#include <cstdint>
#include <string>

namespace kvrt {

struct ExactFraction {
  uint64_t numerator = 0;
  uint64_t denominator = 1;  // never 0

  // Reduces n/d to lowest terms; d must be > 0 (callers check, KVRT_ASSERT otherwise).
  static ExactFraction of(uint64_t n, uint64_t d);

  double to_double() const { return static_cast<double>(numerator) / static_cast<double>(denominator); }
  bool is_integer() const { return denominator == 1; }
  // "7.5" when the denominator has only the prime factors 2 and 5 (a terminating
  // decimal, printed exactly); "1/3" otherwise.
  std::string to_string() const;

  friend bool operator==(const ExactFraction&, const ExactFraction&) = default;
};

}  // namespace kvrt
