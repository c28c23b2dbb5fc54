#include "services/mapper/memfd_backing.hpp"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kvrt {
namespace {

Error os_error(const char* call, int err) {
  return make_error(ErrorCode::os_mapping_failed, std::string(call) + ": " + std::strerror(err), call);
}

}  // namespace

uint64_t MemfdBacking::os_page_bytes() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

Status MemfdBacking::create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) {
  if (base_ != nullptr || fd_ >= 0)
    return make_error(ErrorCode::invalid_argument, "backing already created", "backing");
  // A real mapping cannot be finer than the OS page (0x06C: 64 B is a teaching size).
  const uint64_t unit = mapping_unit_bytes();
  if (page_group_bytes == 0 || page_group_bytes % unit != 0)
    return make_error(ErrorCode::config_field,
                      "G = " + std::to_string(page_group_bytes) + " B is not a multiple of the " +
                          (pages_ == MemfdPages::huge_2m ? "huge" : "OS") + " page (" + std::to_string(unit) + " B)",
                      "page_group_bytes");
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  if (pages_ == MemfdPages::huge_2m) flags |= MFD_HUGETLB | MFD_HUGE_2MB;
  const int fd = memfd_create("kvrt-mapper-pool", flags);
  if (fd < 0) return os_error("memfd_create", errno);
  if (ftruncate(fd, static_cast<off_t>(pool_bytes)) != 0) {
    const int err = errno;
    close(fd);
    return os_error("ftruncate", err);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    const int err = errno;
    close(fd);
    return os_error("fcntl(F_ADD_SEALS)", err);
  }
  // Over-reserve by one unit and trim, so the base is unit-aligned (huge
  // pages can only be mapped at 2 MiB-aligned addresses).
  const uint64_t slack = unit > os_page_bytes() ? unit : 0;
  void* raw = mmap(nullptr, reserved_bytes + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return os_error("mmap(reserve)", err);
  }
  auto* first = static_cast<std::byte*>(raw);
  const uint64_t head = (unit - reinterpret_cast<uintptr_t>(first) % unit) % unit;
  if (slack != 0) {
    if (head != 0) munmap(first, head);
    if (slack - head != 0) munmap(first + head + reserved_bytes, slack - head);
  }
  base_ = first + head;
  reserved_bytes_ = reserved_bytes;
  pool_bytes_ = pool_bytes;
  fd_ = fd;
  return Status::success();
}

Status MemfdBacking::map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) {
  if (base_ == nullptr) return make_error(ErrorCode::invalid_argument, "backing not created", "backing");
  if (va_offset + bytes > reserved_bytes_ || pool_offset + bytes > pool_bytes_)
    return make_error(ErrorCode::coordinate_out_of_range, "mapping outside reservation or pool", "offset");
  void* at = mmap(base_ + va_offset, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
                  static_cast<off_t>(pool_offset));
  if (at == MAP_FAILED) return os_error("mmap(map)", errno);
  return Status::success();
}

Status MemfdBacking::unmap(uint64_t va_offset, uint64_t bytes) {
  if (base_ == nullptr) return make_error(ErrorCode::invalid_argument, "backing not created", "backing");
  if (va_offset + bytes > reserved_bytes_)
    return make_error(ErrorCode::coordinate_out_of_range, "unmap outside reservation", "offset");
  void* at = mmap(base_ + va_offset, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) return os_error("mmap(unmap)", errno);
  return Status::success();
}

void MemfdBacking::release() {
  if (base_ != nullptr) munmap(base_, reserved_bytes_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  fd_ = -1;
  reserved_bytes_ = pool_bytes_ = 0;
}

}  // namespace kvrt
