#include "services/common/scm_rights.hpp"

#include <cstring>

#include "services/common/assert.hpp"

namespace kvrt {

std::vector<int> scm_rights_fds(std::span<const std::byte> control) {
  // The walk of CMSG_FIRSTHDR / CMSG_NXTHDR, with every length checked
  // against what is left of the buffer before it is used: those macros trust
  // the first header's cmsg_len, and a length below the header's own size or
  // beyond the buffer would read past it. Read through memcpy, so the buffer
  // needs no alignment.
  std::vector<int> fds;
  size_t at = 0;  // [bytes] offset of the current control message
  while (control.size() - at >= sizeof(cmsghdr)) {
    cmsghdr c;
    std::memcpy(&c, control.data() + at, sizeof c);
    if (c.cmsg_len < CMSG_LEN(0) || c.cmsg_len > control.size() - at) break;
    if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == SCM_RIGHTS) {
      const size_t n = (c.cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, control.data() + at + CMSG_LEN(0) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
    const size_t next = CMSG_ALIGN(c.cmsg_len);
    if (next >= control.size() - at) break;
    at += next;
  }
  return fds;
}

void attach_scm_rights(msghdr& msg, std::span<std::byte> control, std::span<const int> fds) {
  if (fds.empty()) return;
  const size_t bytes = CMSG_SPACE(fds.size() * sizeof(int));
  KVRT_ASSERT(control.size() >= bytes, "control buffer too small for the descriptors");
  std::memset(control.data(), 0, bytes);
  msg.msg_control = control.data();
  msg.msg_controllen = bytes;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
}

}  // namespace kvrt
