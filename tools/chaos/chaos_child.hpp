#pragma once
// A child process of a campaign (the node, a worker): spawned tied to the
// campaign's thread, so it dies with the campaign, and reaped by poll().
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "services/common/child_process.hpp"
#include "services/common/result.hpp"

namespace kvrt::chaos {

struct Child {
  pid_t pid = -1;
  std::string log;
  std::optional<int> status;  // exit code, or 128 + signal

  bool running() const { return pid > 0 && !status; }
  // Reaps without blocking; true once it has exited.
  bool poll() {
    if (pid <= 0 || status) return true;
    int s = 0;
    if (::waitpid(pid, &s, WNOHANG) != pid) return false;
    status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
    return true;
  }
  void kill_and_reap() {
    if (!running()) return;
    ::kill(pid, SIGKILL);
    int s = 0;
    ::waitpid(pid, &s, 0);
    status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  }
};

// `kvrt_binary args...` with its output in `log`.
inline Result<pid_t> spawn_child(const std::string& kvrt_binary, const std::vector<std::string>& args,
                                 const std::string& log) {
  return spawn_tied_child(kvrt_binary, args, ChildOutput{-1, log, {}, true}, SIGKILL);
}

// A log as it is now; empty when it cannot be read.
inline std::string read_log(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kvrt::chaos
