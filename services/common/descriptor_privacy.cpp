#include "services/common/descriptor_privacy.hpp"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kvrt {

Status keep_descriptors_private() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return make_error(ErrorCode::io, std::string("prctl(PR_SET_DUMPABLE, 0): ") + std::strerror(errno), "dumpable");
  return Status::success();
}

}  // namespace kvrt
