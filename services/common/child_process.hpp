#pragma once
// Child processes that do not outlive their parent: `kvrt run`'s workers,
// the node child of `kvrt bench rpc`, and the node and worker children of the
// process tests. A parent killed with SIGKILL cannot clean up, so the kernel
// signals each child instead (PR_SET_PDEATHSIG): no worker keeps writing into
// pools that are gone, and no node keeps its segments and a core after the
// bench or test that started it died.
//
// The signal is sent when the *thread* that spawned the child exits, not the
// process: spawn from a thread that lives as long as the child should.
#include <sys/types.h>

#include <string>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

// Where the child's standard output and error go. A path is opened by the
// child (created, truncated, mode 0644); an fd is duplicated; neither: inherited.
struct ChildOutput {
  int stdout_fd = -1;
  std::string stdout_path;
  std::string stderr_path;
  bool stderr_to_stdout = false;  // stderr joins stdout (after stdout is redirected)
};

// Starts `program` with `args` (argv[0] is `program`) and returns its pid. The
// child gets `death_signal` when the calling thread exits. Errors (the fork, a
// file that cannot be opened, an exec that fails) are typed, with errno's text
// and the child already reaped.
Result<pid_t> spawn_tied_child(const std::string& program, const std::vector<std::string>& args,
                               const ChildOutput& output, int death_signal);

}  // namespace kvrt
