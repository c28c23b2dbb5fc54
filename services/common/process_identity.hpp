#pragma once
// Who owns a segment, in a form that survives pid reuse. A pid alone is not an
// identity: after the owner crashes the kernel may hand its pid to an unrelated
// process. The pair (pid, start time) is unique for the life of a boot, because
// a recycled pid necessarily starts later. The start time is field 22 of
// /proc/<pid>/stat ("starttime", clock ticks since boot, proc(5)).
//
// Limitation: pids are local to a pid namespace. Two containers that share one
// /dev/shm but not a pid namespace cannot judge each other's segments; the
// instance id in the segment name keeps them from meeting in the first place.
#include <cstdint>
#include <optional>
#include <string_view>

#include "services/common/result.hpp"

namespace kvrt {

struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t start_time_ticks = 0;  // /proc/<pid>/stat field 22 [clock ticks since boot]
  friend bool operator==(const ProcessIdentity&, const ProcessIdentity&) = default;
};

enum class OwnerState : uint8_t {
  alive,       // the recorded process still runs
  exited,      // no such pid, or it is a zombie (its mappings are already gone)
  pid_reused,  // the pid runs, but it is a later process (start time differs)
};
std::string_view to_string(OwnerState s);

// The calling process. Errors: io when /proc/self/stat cannot be read.
Result<ProcessIdentity> current_process_identity();

// Parses the text of a /proc/<pid>/stat file: (state, start time). The command
// name in field 2 may contain spaces and ')' (it is the executable's name), so
// parsing starts after the last ')'. Errors: decode_failed.
struct ProcStat {
  char state = '?';               // field 3: R, S, D, Z, X, ...
  uint64_t start_time_ticks = 0;  // field 22
};
Result<ProcStat> parse_proc_stat(std::string_view text);

// Judges a recorded owner against the live process table.
OwnerState owner_state(const ProcessIdentity& recorded);

}  // namespace kvrt
