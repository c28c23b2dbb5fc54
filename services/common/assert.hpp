#pragma once
// KVRT_ASSERT: a bug in kvrt (KJ_ASSERT's role), never a caller error. Always on:
// the checks it guards are O(1); full re-derivations live in validate().
#include <string>
#include <string_view>

namespace kvrt::detail {
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, std::string_view message);
}

#define KVRT_ASSERT(cond, message)                                            \
  do {                                                                        \
    if (!(cond)) [[unlikely]]                                                 \
      ::kvrt::detail::assertion_failed(#cond, __FILE__, __LINE__, (message)); \
  } while (0)
