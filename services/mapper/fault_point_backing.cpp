#include "services/mapper/fault_point_backing.hpp"

namespace kvrt {

Status FaultPointBacking::map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) {
  ++maps_;
  if (faults_.reached("os_map")) {
    ++refused_;
    return make_error(ErrorCode::os_mapping_failed, "mmap: Cannot allocate memory (fault point os_map)", "mmap");
  }
  return inner_->map(va_offset, pool_offset, bytes);
}

Status FaultPointBacking::unmap(uint64_t va_offset, uint64_t bytes) {
  ++unmaps_;
  if (faults_.reached("os_unmap")) {
    ++refused_;
    return make_error(ErrorCode::os_mapping_failed, "munmap: Cannot allocate memory (fault point os_unmap)", "mmap");
  }
  return inner_->unmap(va_offset, bytes);
}

}  // namespace kvrt
