#pragma once
// File descriptors carried as SCM_RIGHTS control data on an AF_UNIX socket:
// how a node hands a worker memory that has no name (the mapper's page pool,
// unnamed pool segments). The parsing half trusts nothing it reads: control
// data comes from another process.
#include <sys/socket.h>

#include <cstddef>
#include <span>
#include <vector>

namespace kvrt {

// The most descriptors one message carries (the kernel's SCM_MAX_FD is 253):
// a receiver sizes its control buffer for this many, so more are seen as cut
// control data (MSG_CTRUNC) rather than dropped without notice.
inline constexpr size_t kMaxDescriptorsPerMessage = 64;
inline constexpr size_t kDescriptorControlBytes = CMSG_SPACE(kMaxDescriptorsPerMessage * sizeof(int));

// The descriptors of every SCM_RIGHTS control message in `control` (what
// recvmsg wrote to msg_control, msg_controllen bytes of it), in order; a
// control message whose length does not fit the buffer ends the walk. The
// caller owns them.
std::vector<int> scm_rights_fds(std::span<const std::byte> control);

// Fills `control` (at least CMSG_SPACE(fds.size() * sizeof(int)) bytes,
// aligned for cmsghdr) with one SCM_RIGHTS message carrying `fds`, and
// points `msg` at it. Nothing happens for an empty list.
void attach_scm_rights(msghdr& msg, std::span<std::byte> control, std::span<const int> fds);

}  // namespace kvrt
