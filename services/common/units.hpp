#pragma once
// Byte and token units. Ledgers keep exact integers (bytes, rows, blocks);
// conversion to KiB/MiB happens only when printing.
#include <cstdint>
#include <string>

namespace kvrt {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;

constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Exact decimal rendering of bytes in MiB, e.g. 4849664 -> "4.625"; stops at the
// first exact digit (a MiB fraction has at most 20 decimal digits).
std::string format_mib(uint64_t bytes);
std::string format_kib(uint64_t bytes);

}  // namespace kvrt
