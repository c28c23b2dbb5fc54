#pragma once
// CPU realisation of the page backing (docs/stack-notes.md "memfd pages"):
// - the virtual reservation is one mmap(PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|
//   MAP_NORESERVE) range: address space, not memory (0x06A);
// - the physical pool is ONE memfd created with MFD_ALLOW_SEALING, sized once
//   and sealed against shrink/grow, so handle h is the run at offset h*G;
// - map = mmap(MAP_FIXED|MAP_SHARED) of (fd, offset) over the reserved page;
// - unmap = mmap(PROT_NONE|MAP_FIXED|MAP_NORESERVE) anonymous over it, never a
//   plain munmap (that would leave a hole anything could take).
// With MemfdPages::huge_2m the pool is a MFD_HUGETLB memfd of 2 MiB pages and
// the reservation is 2 MiB aligned; G must then be a multiple of 2 MiB. Where
// no huge pages are configured the first map() fails (os_mapping_failed), which
// is how callers find out (docs/stack-notes.md: MFD_HUGETLB fails on the build machines).
#include <cstddef>
#include <cstdint>

#include "services/mapper/page_backing.hpp"

namespace kvrt {

enum class MemfdPages : uint8_t { os_pages = 0, huge_2m = 1 };

class MemfdBacking final : public PageBacking {
 public:
  explicit MemfdBacking(MemfdPages pages = MemfdPages::os_pages) : pages_(pages) {}
  MemfdBacking(const MemfdBacking&) = delete;
  MemfdBacking& operator=(const MemfdBacking&) = delete;
  ~MemfdBacking() override { release(); }

  static uint64_t os_page_bytes();
  static constexpr uint64_t kHugePageBytes = 2ull << 20;  // MFD_HUGE_2MB [bytes]
  // The unit G must be a multiple of: the OS page, or 2 MiB for huge_2m [bytes].
  uint64_t mapping_unit_bytes() const { return pages_ == MemfdPages::huge_2m ? kHugePageBytes : os_page_bytes(); }

  Status create(uint64_t reserved_bytes, uint64_t pool_bytes, uint64_t page_group_bytes) override;
  Status map(uint64_t va_offset, uint64_t pool_offset, uint64_t bytes) override;
  Status unmap(uint64_t va_offset, uint64_t bytes) override;
  void release() override;
  std::byte* reservation_base() const override { return base_; }

  int pool_fd() const { return fd_; }  // for reading a handle back through the pool

 private:
  MemfdPages pages_ = MemfdPages::os_pages;
  std::byte* base_ = nullptr;
  uint64_t reserved_bytes_ = 0;  // [bytes of address space]
  uint64_t pool_bytes_ = 0;      // [bytes of memfd]
  int fd_ = -1;
};

}  // namespace kvrt
