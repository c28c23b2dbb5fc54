#pragma once
// A process that holds descriptors of unnamed pool segments must not let
// other processes of its uid reopen them through /proc/<pid>/fd (or read
// its memory through /proc/<pid>/mem): the segments have no name precisely
// so that only the sessions the node chose can map them. A non-dumpable
// process's /proc entries need CAP_SYS_PTRACE from anyone else (ptrace
// access mode checks, proc(5)), so unprivileged processes of the same uid
// are kept out; root, as always, is not. The cost: no core dumps, and a
// debugger attaches only with that capability (docs/operations.md).
#include "services/common/result.hpp"

namespace kvrt {

// prctl(PR_SET_DUMPABLE, 0) for this process. Idempotent. Errors: io.
Status keep_descriptors_private();

}  // namespace kvrt
