#pragma once
// Runs a peer program of a two-process test with posix_spawn (never fork: the
// peer must be a fresh process image that attaches by name) and collects its
// exit code, one-line stdout and stderr.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace kvrt::test {

struct PeerResult {
  int exit_code = -1;
  std::string output;  // stdout, trailing newline removed
  std::string errors;  // stderr
};

inline std::string drain_fd(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

inline PeerResult run_peer_program(const char* program, const std::vector<std::string>& args) {
  int out[2], err[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(err) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  for (int fd : {out[0], out[1], err[0], err[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<std::string> argv_storage{program};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, program, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  REQUIRE(rc == 0);
  PeerResult result;
  // Peers write one short line to either stream, far below a pipe's buffer,
  // so draining them one after the other cannot block the peer.
  result.output = drain_fd(out[0]);
  result.errors = drain_fd(err[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!result.output.empty() && result.output.back() == '\n') result.output.pop_back();
  return result;
}

}  // namespace kvrt::test
