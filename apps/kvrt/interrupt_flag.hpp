#pragma once
// SIGINT and SIGTERM caught into a flag for as long as one is alive, so a
// long-running view (`kvrt top`, `kvrt stats --watch`) finishes what it
// draws and leaves cleanly instead of dying mid-line; the previous
// handlers come back when it goes.
#include <signal.h>

#include <atomic>

namespace kvrt::app {

class InterruptFlag {
 public:
  InterruptFlag() {
    raised().store(false);
    struct sigaction sa {};
    sa.sa_handler = [](int) { raised().store(true); };
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~InterruptFlag() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;

  bool raised_now() const { return raised().load(); }

 private:
  static std::atomic<bool>& raised() {
    static std::atomic<bool> flag{false};
    return flag;
  }
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace kvrt::app
