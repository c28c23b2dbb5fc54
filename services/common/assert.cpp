#include "services/common/assert.hpp"

#include <cstdio>
#include <cstdlib>

namespace kvrt::detail {
void assertion_failed(const char* expr, const char* file, int line, std::string_view message) {
  std::fprintf(stderr, "kvrt: internal assertion failed: %s at %s:%d: %.*s\n", expr, file, line,
               static_cast<int>(message.size()), message.data());
  std::abort();
}
}  // namespace kvrt::detail
