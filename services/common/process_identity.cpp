#include "services/common/process_identity.hpp"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace kvrt {
namespace {

// Reads /proc/<pid>/stat; nullopt when the process does not exist.
std::optional<std::string> read_stat(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string_view to_string(OwnerState s) {
  switch (s) {
    case OwnerState::alive:
      return "alive";
    case OwnerState::exited:
      return "exited";
    case OwnerState::pid_reused:
      return "pid_reused";
  }
  return "unknown";
}

Result<ProcStat> parse_proc_stat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos)
    return make_error(ErrorCode::decode_failed, "no ')' closing the command name", "proc_stat");
  // Fields after the command name, separated by single spaces: field 3 first.
  std::string_view rest = text.substr(close + 1);
  ProcStat out;
  int field = 2;
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = pos;
    while (end < rest.size() && rest[end] != ' ' && rest[end] != '\n') ++end;
    if (end == pos) break;
    ++field;
    std::string_view token = rest.substr(pos, end - pos);
    if (field == 3) out.state = token.front();
    if (field == 22) {
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), out.start_time_ticks);
      if (ec != std::errc{} || ptr != token.data() + token.size())
        return make_error(ErrorCode::decode_failed, "field 22 (starttime) is not a number: " + std::string(token),
                          "proc_stat");
      return out;
    }
    pos = end;
  }
  return make_error(ErrorCode::decode_failed, "fewer than 22 fields", "proc_stat");
}

Result<ProcessIdentity> current_process_identity() {
  auto text = read_stat("/proc/self/stat");
  if (!text) return make_error(ErrorCode::io, "cannot read /proc/self/stat", "owner_start_time");
  ProcStat stat;
  KVRT_TRY_ASSIGN(stat, parse_proc_stat(*text));
  return ProcessIdentity{static_cast<int32_t>(::getpid()), stat.start_time_ticks};
}

OwnerState owner_state(const ProcessIdentity& recorded) {
  if (recorded.pid <= 0) return OwnerState::exited;
  auto text = read_stat("/proc/" + std::to_string(recorded.pid) + "/stat");
  if (!text) return OwnerState::exited;
  auto stat = parse_proc_stat(*text);
  // An unreadable stat of an existing pid is not evidence of death: keep the
  // segment (removing a live owner's pool would corrupt its readers).
  if (!stat.ok()) return OwnerState::alive;
  // A zombie has released its mappings; only its exit status remains.
  if (stat->state == 'Z' || stat->state == 'X') return OwnerState::exited;
  if (stat->start_time_ticks != recorded.start_time_ticks) return OwnerState::pid_reused;
  return OwnerState::alive;
}

}  // namespace kvrt
