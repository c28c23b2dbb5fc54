// libFuzzer's entry point for one fuzz target (KVRT_FUZZ=ON, clang):
// KVRT_FUZZ_ENTRY names the target's kvrt_fuzz_<name> (fuzz/CMakeLists.txt
// compiles this file once per target).
#include <cstddef>
#include <cstdint>

int KVRT_FUZZ_ENTRY(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return KVRT_FUZZ_ENTRY(data, size); }
