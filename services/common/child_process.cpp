#include "services/common/child_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace kvrt {

namespace {

// What the child reports through the pipe before it dies: the step that
// failed and its errno. Nothing arrives when exec succeeds (the pipe is
// close-on-exec).
struct ChildFailure {
  int step = 0;  // 1 death signal, 2 stdout, 3 stderr, 4 exec
  int error = 0;
};

[[noreturn]] void fail_in_child(int report_fd, int step) {
  const ChildFailure f{step, errno};
  // Async-signal-safe only from here on: write and _exit.
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

int open_output(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

const char* step_name(int step) {
  switch (step) {
    case 1:
      return "set its death signal";
    case 2:
      return "open its standard output";
    case 3:
      return "open its standard error";
    default:
      return "execute";
  }
}

}  // namespace

Result<pid_t> spawn_tied_child(const std::string& program, const std::vector<std::string>& args,
                               const ChildOutput& output, int death_signal) {
  // Everything the child needs is built before the fork: between fork and
  // exec a threaded process may only make async-signal-safe calls.
  std::vector<std::string> storage{program};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return make_error(ErrorCode::io,
                      std::string("cannot create a pipe to start ") + program + ": " + std::strerror(errno), "program");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    return make_error(ErrorCode::io, "cannot fork to start " + program + ": " + std::strerror(e), "program");
  }
  if (pid == 0) {
    ::close(report[0]);
    // The parent may have died before the signal was armed: then nobody would send it.
    if (::prctl(PR_SET_PDEATHSIG, death_signal) != 0) fail_in_child(report[1], 1);
    if (::getppid() != parent) {
      errno = ESRCH;  // the parent is gone already
      fail_in_child(report[1], 1);
    }
    if (!output.stdout_path.empty()) {
      const int fd = open_output(output.stdout_path);
      if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) fail_in_child(report[1], 2);
    } else if (output.stdout_fd >= 0 && ::dup2(output.stdout_fd, STDOUT_FILENO) < 0) {
      fail_in_child(report[1], 2);
    }
    if (output.stderr_to_stdout) {
      if (::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) fail_in_child(report[1], 3);
    } else if (!output.stderr_path.empty()) {
      const int fd = open_output(output.stderr_path);
      if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) fail_in_child(report[1], 3);
    }
    ::execve(program.c_str(), argv.data(), environ);
    fail_in_child(report[1], 4);
  }
  ::close(report[1]);
  ChildFailure failure;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got <= 0) return pid;  // exec succeeded: the pipe closed with nothing in it
  ::waitpid(pid, nullptr, 0);
  return make_error(ErrorCode::io,
                    "cannot start " + program + ": the child could not " + step_name(failure.step) + ": " +
                        std::strerror(failure.error),
                    "program");
}

}  // namespace kvrt
