// kvrt_fuzz_replay TARGET PATH...: runs every file of the given corpus
// folders (or the given files) through one fuzz target's entry point, with
// whatever compiler built it, as `ctest -R fuzz.replay` does for each
// fuzz/corpus/<target>/. A broken contract traps; the handler below names the
// input first, so a failing regression file is found in the test's output.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#define KVRT_FUZZ_TARGET(name) int kvrt_fuzz_##name(const uint8_t* data, size_t size);
#include "fuzz/fuzz_target_list.inc"
#undef KVRT_FUZZ_TARGET

namespace {

struct Target {
  std::string_view name;
  int (*run)(const uint8_t* data, size_t size);
};

constexpr Target kTargets[] = {
#define KVRT_FUZZ_TARGET(name) {#name, &kvrt_fuzz_##name},
#include "fuzz/fuzz_target_list.inc"
#undef KVRT_FUZZ_TARGET
};

// The input being run, for the fatal-signal handler (a fixed buffer: the
// handler may only call async-signal-safe functions).
char current_input[4096];

void on_fatal_signal(int sig) {
  const char prefix[] = "kvrt_fuzz_replay: fatal signal while running ";
  (void)!::write(STDERR_FILENO, prefix, sizeof prefix - 1);
  (void)!::write(STDERR_FILENO, current_input, std::strlen(current_input));
  (void)!::write(STDERR_FILENO, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  const Target* target = nullptr;
  if (argc >= 2)
    for (const Target& t : kTargets)
      if (t.name == argv[1]) target = &t;
  if (target == nullptr || argc < 3) {
    std::fprintf(stderr, "usage: kvrt_fuzz_replay TARGET PATH...\ntargets:");
    for (const Target& t : kTargets) std::fprintf(stderr, " %.*s", static_cast<int>(t.name.size()), t.name.data());
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<std::filesystem::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "kvrt_fuzz_replay: no such file or folder: %s\n", argv[i]);
      return 2;
    }
  }
  // An empty corpus would pass without testing anything.
  if (inputs.empty()) {
    std::fprintf(stderr, "kvrt_fuzz_replay: no inputs for %s\n", argv[1]);
    return 1;
  }
  std::sort(inputs.begin(), inputs.end());
  for (int sig : {SIGABRT, SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGTRAP}) std::signal(sig, on_fatal_signal);
  for (const std::filesystem::path& p : inputs) {
    std::snprintf(current_input, sizeof current_input, "%s", p.c_str());
    std::ifstream in(p, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "kvrt_fuzz_replay: cannot read %s\n", p.c_str());
      return 1;
    }
    target->run(bytes.data(), bytes.size());
  }
  std::printf("kvrt_fuzz_replay: %zu inputs through %s\n", inputs.size(), argv[1]);
  return 0;
}
