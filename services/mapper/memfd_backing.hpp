#pragma once
// CPU realisation of the page backing (issue 6, STACK.md "memfd pages"):
// - the virtual reservation is one mmap(PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|
//   MAP_NORESERVE) range: address space, not memory (0x06A);
// - the physical pool is ONE memfd created with MFD_ALLOW_SEALING, sized once
//   and sealed against shrink/grow, so handle h is the run at offset h*G;
// - map = mmap(MAP_FIXED|MAP_SHARED) of (fd, offset) over the reserved page;
// - unmap = mmap(PROT_NONE|MAP_FIXED|MAP_NORESERVE) anonymous over it, never a
//   plain munmap (that would leave a hole anything could take).
#include <cstddef>
#include <cstdint>

#include "services/mapper/page_backing.hpp"

namespace kvrt {

class MemfdBacking final : public PageBacking {
 public:
  MemfdBacking() = default;
  MemfdBacking(const MemfdBacking&) = delete;
  MemfdBacking& operator=(const MemfdBacking&) = delete;
  ~MemfdBacking() override { release(); }

  static uint64_t os_page_bytes();

  Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) override;
  Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) override;
  Status unmap(uint64_t va_offset, uint64_t bytes) override;
  void release() override;
  std::byte* reservation_base() const override { return base_; }

  int pool_fd() const { return fd_; }  // for reading a handle back through the pool

 private:
  std::byte* base_ = nullptr;
  uint64_t reserved_bytes_ = 0;  // [bytes of address space]
  uint64_t pool_bytes_ = 0;      // [bytes of memfd]
  int fd_ = -1;
};

}  // namespace kvrt
