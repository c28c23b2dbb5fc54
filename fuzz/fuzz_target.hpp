#pragma once
// What every fuzz target shares (docs/fuzzing.md). A target is a plain
// function, `int kvrt_fuzz_<name>(const uint8_t* data, size_t size)` in
// fuzz/targets/<name>.cpp, that feeds the bytes to one decoder of untrusted
// input and checks its contract: the decoder answers a value or kvrt's typed
// Error, never a crash, a hang or an exception; and where an encoder exists,
// what it encodes from a decoded value decodes back to that value. The same
// body runs under libFuzzer (libfuzzer_main.cpp, clang) and in the test
// suite's corpus replay (replay_main.cpp, any compiler), so a regression file
// fails CI without clang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "services/common/error.hpp"

namespace kvrt::fuzz {

// A broken contract: prints what and where, then traps, so that libFuzzer
// records the input as a crash and the replay's test fails.
[[noreturn]] void violated(const char* what, const char* file, int line, const std::string& detail = {});

// The input as text (TOML, JSON): bytes as they are, NULs included.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A refusal must be typed: a code other than ok and a reason to show.
void require_typed_error(const Error& e, const char* file, int line);

}  // namespace kvrt::fuzz

#define KVRT_FUZZ_REQUIRE(cond, detail)                            \
  do {                                                             \
    if (!(cond)) [[unlikely]]                                      \
      ::kvrt::fuzz::violated(#cond, __FILE__, __LINE__, (detail)); \
  } while (0)

#define KVRT_FUZZ_TYPED_ERROR(error) ::kvrt::fuzz::require_typed_error((error), __FILE__, __LINE__)
