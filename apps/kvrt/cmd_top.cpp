// `kvrt top --node PATH [--interval S]`: a refreshing terminal view of a
// node (pools, prefix cache, funnel, sessions, events, alerts, receipt
// latency per route), redrawn every interval on the terminal's alternate
// screen, usable over ssh. `q` or Ctrl-C quits and gives the terminal back
// as it was (a node that stops answering ends it too, with the error).
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/kvrt/interrupt_flag.hpp"
#include "apps/kvrt/subcommand_registry.hpp"
#include "tools/watch/node_watcher.hpp"

namespace kvrt::app {
namespace {

struct TopCli {
  std::string node = "kvrt-node.json";
  double interval_s = 1.0;
};

// The terminal in character mode without echo for the view's life; ISIG
// stays on, so Ctrl-C still raises SIGINT (caught, not fatal).
class TerminalSession {
 public:
  TerminalSession() {
    if (::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;  // alternate screen, cursor hidden
  }
  ~TerminalSession() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (restore_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  static size_t width() {
    winsize w{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
    return 100;
  }

  // Waits up to `seconds` for a key; true when it was q (or Q), or when a
  // signal asked to stop.
  bool wait_for_quit(double seconds) const {
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int timeout_ms = static_cast<int>(std::lround(seconds * 1000.0));
    const int r = ::poll(&in, 1, timeout_ms);
    if (interrupt_.raised_now()) return true;
    if (r > 0 && (in.revents & POLLIN)) {
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return true;
      if ((in.revents & POLLHUP) != 0) return true;
    }
    return false;
  }

 private:
  InterruptFlag interrupt_;  // Ctrl-C ends the view, it does not kill it
  termios saved_{};
  bool restore_ = false;
};

int run_top(const TopCli& cli) {
  if (!(cli.interval_s >= 0.05 && cli.interval_s <= 3600))
    return report_error("top", make_error(ErrorCode::invalid_argument, "between 0.05 and 3600 seconds", "interval"));
  if (!::isatty(STDOUT_FILENO))
    return report_error("top", make_error(ErrorCode::invalid_argument,
                                          "kvrt top draws on a terminal; for logs use kvrt stats --watch", "stdout"));
  Result<std::unique_ptr<watch::NodeWatcher>> watcher = watch::NodeWatcher::connect(cli.node);
  if (!watcher.ok()) return report_error("top", watcher.error());
  const NodeDescriptor& d = (*watcher)->descriptor();
  const std::string title = "kvrt top  node " + d.address_and_pid();
  std::optional<watch::NodeViewSample> previous;
  std::optional<Error> failure;
  {
    TerminalSession terminal;
    do {
      Result<watch::NodeViewSample> sample = (*watcher)->read();
      if (!sample.ok()) {
        failure = sample.error();
        break;
      }
      const watch::NodeView view = watch::node_view(previous ? &*previous : nullptr, *sample);
      std::string frame = "\x1b[H\x1b[2J";
      for (const std::string& line : watch::top_frame(view, title, TerminalSession::width())) {
        frame += line;
        frame += '\n';  // the terminal's output processing (OPOST) stays on: it adds the CR
      }
      std::cout << frame << std::flush;
      previous = std::move(*sample);
    } while (!terminal.wait_for_quit(cli.interval_s));
  }
  if (failure) return report_error("top", *failure);
  return 0;
}

SubcommandRegistration top_command{
    "top", [](CLI::App& parent) -> std::function<int()> {
      auto opts = std::make_shared<TopCli>();
      CLI::App* sub = parent.add_subcommand("top", "A refreshing terminal view of a running node (q quits)");
      sub->add_option("--node", opts->node, "node descriptor written by `kvrt node`")->capture_default_str();
      sub->add_option("--interval", opts->interval_s, "seconds between refreshes")->capture_default_str();
      return [opts] { return run_top(*opts); };
    }};

}  // namespace
}  // namespace kvrt::app
