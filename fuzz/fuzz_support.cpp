#include <cstdio>

#include "fuzz/fuzz_target.hpp"

namespace kvrt::fuzz {

void violated(const char* what, const char* file, int line, const std::string& detail) {
  std::fprintf(stderr, "kvrt fuzz: contract broken at %s:%d: %s%s%s\n", file, line, what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

void require_typed_error(const Error& e, const char* file, int line) {
  if (e.code == ErrorCode::ok) violated("a refusal carries an error code", file, line, e.reason);
  if (e.reason.empty()) violated("a refusal says why", file, line, e.describe());
}

}  // namespace kvrt::fuzz
