// spawn_tied_child (services/common/child_process.hpp): output redirection,
// typed errors for every step that can fail, and the death signal that ends
// a child when the thread that spawned it exits.
#include "services/common/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace kvrt {
namespace {

std::filesystem::path scratch(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvrt-child-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The child's wait status, or -1 if it is still running after `limit`.
int wait_for(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

}  // namespace

TEST_CASE("a tied child writes stdout and stderr where it is told", "[child_process]") {
  const auto dir = scratch("output");
  SECTION("both into one file") {
    Result<pid_t> pid = spawn_tied_child("/bin/sh", {"-c", "echo out; echo err >&2; exit 3"},
                                         ChildOutput{-1, (dir / "both.log").string(), {}, true}, SIGKILL);
    REQUIRE(pid.ok());
    const int status = wait_for(*pid, std::chrono::seconds(10));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 3);
    CHECK(read_file(dir / "both.log") == "out\nerr\n");
  }
  SECTION("stdout into a pipe, stderr into a file") {
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    Result<pid_t> pid = spawn_tied_child("/bin/sh", {"-c", "echo out; echo err >&2"},
                                         ChildOutput{out[1], {}, (dir / "err.log").string(), false}, SIGKILL);
    ::close(out[1]);
    REQUIRE(pid.ok());
    char buf[16] = {};
    CHECK(::read(out[0], buf, sizeof buf) == 4);
    ::close(out[0]);
    const int status = wait_for(*pid, std::chrono::seconds(10));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(std::string(buf) == "out\n");
    CHECK(read_file(dir / "err.log") == "err\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a tied child that cannot start is a typed error naming the step", "[child_process]") {
  const auto dir = scratch("errors");
  Result<pid_t> missing = spawn_tied_child((dir / "no-such-program").string(), {}, ChildOutput{}, SIGKILL);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
  CHECK(missing.error().reason.find("could not execute") != std::string::npos);
  CHECK(missing.error().reason.find(std::strerror(ENOENT)) != std::string::npos);

  Result<pid_t> bad_log =
      spawn_tied_child("/bin/true", {}, ChildOutput{-1, (dir / "missing-dir" / "x.log").string(), {}, false}, SIGKILL);
  REQUIRE_FALSE(bad_log.ok());
  CHECK(bad_log.error().reason.find("could not open its standard output") != std::string::npos);

  Result<pid_t> bad_err =
      spawn_tied_child("/bin/true", {}, ChildOutput{-1, {}, (dir / "missing-dir" / "e.log").string(), false}, SIGKILL);
  REQUIRE_FALSE(bad_err.ok());
  CHECK(bad_err.error().reason.find("could not open its standard error") != std::string::npos);
  // Each failed child was reaped by the call: none is left for this process.
  int status = 0;
  CHECK(::waitpid(-1, &status, WNOHANG) <= 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a tied child gets its death signal when the spawning thread exits", "[child_process]") {
  pid_t pid = -1;
  std::string error;
  std::thread spawner([&] {
    Result<pid_t> p = spawn_tied_child("/bin/sleep", {"30"}, ChildOutput{}, SIGTERM);
    if (p.ok())
      pid = *p;
    else
      error = p.error().describe();
  });
  spawner.join();
  INFO(error);
  REQUIRE(pid > 0);
  const int status = wait_for(pid, std::chrono::seconds(10));
  if (status == -1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  REQUIRE(status != -1);  // it did not sleep its 30 s
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

}  // namespace kvrt
