#include "services/common/units.hpp"

namespace kvrt {
namespace {
std::string format_exact(uint64_t bytes, uint64_t unit) {
  std::string out = std::to_string(bytes / unit);
  uint64_t rem = bytes % unit;
  if (rem == 0) return out;
  out.push_back('.');
  // unit is a power of two, so the expansion terminates; rem*10 < unit*10 fits u64.
  while (rem != 0) {
    rem *= 10;
    out.push_back(static_cast<char>('0' + rem / unit));
    rem %= unit;
  }
  return out;
}
}  // namespace

std::string format_mib(uint64_t bytes) { return format_exact(bytes, kMiB); }
std::string format_kib(uint64_t bytes) { return format_exact(bytes, kKiB); }

}  // namespace kvrt
