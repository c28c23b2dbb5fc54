#pragma once
// Runs the kvrt binary built with this suite (KVRT_BINARY) through the shell
// and collects its exit code and stdout; stderr is discarded. Used by every
// suite that checks a subcommand end to end.
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace kvrt::test {

struct KvrtRun {
  int exit_code = -1;
  std::string out;  // stdout
};

inline KvrtRun run_kvrt(const std::string& args) {
  const std::string command = std::string("'") + KVRT_BINARY + "' " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  KvrtRun run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace kvrt::test
