#pragma once
// The operating-system side of a pool segment, kept apart from the pool logic:
// opening, sizing and mapping a POSIX shared-memory object through
// Boost.Interprocess, plus the few calls Boost does not wrap (posix_fallocate,
// fstatvfs, fstat identity, mprotect). Every failure becomes a typed Error;
// Boost exceptions never leave this file.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "services/common/result.hpp"
#include "services/common/unique_fd.hpp"

namespace kvrt::shm {

// Identity of the file behind a name, to make sure a name still refers to the
// object we examined before we unlink it.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

class SegmentFile {
 public:
  // shm_open(O_CREAT|O_EXCL), mode 0600: K/V rows are user data, so only the
  // owning uid may map them. Errors: segment_in_use (the name exists), io.
  static Result<SegmentFile> create(std::string_view name);
  // shm_open of an existing name. Errors: io (missing: reason says so).
  static Result<SegmentFile> open(std::string_view name, bool writable);
  // An unnamed segment (memfd_create, close-on-exec, sealable): it never has
  // a name another process could open, and it is freed when its last
  // descriptor and mapping go, so a crash leaves nothing behind. `label`
  // shows in /proc/<pid>/maps and in errors. Errors: storage_exhausted (no
  // memory or descriptors), io.
  static Result<SegmentFile> create_unnamed(std::string_view label);
  // A received descriptor of an unnamed segment, adopted. Errors:
  // invalid_argument (no descriptor), decode_failed (not a regular file), io.
  static Result<SegmentFile> adopt(UniqueFd descriptor, std::string_view label);
  // shm_unlink. Errors: io.
  static Status unlink(std::string_view name);

  SegmentFile(SegmentFile&&) noexcept;
  SegmentFile& operator=(SegmentFile&&) noexcept;
  ~SegmentFile();

  const std::string& name() const;  // the name, or an unnamed segment's label
  bool unnamed() const;
  int descriptor() const;  // borrowed: valid while this object lives
  // Seals an unnamed segment's size (shrink, grow, and the seals
  // themselves) so no holder of its descriptor can change it. Errors: io.
  Status seal_size();
  bool size_sealed() const;
  Result<uint64_t> size() const;  // [bytes]
  Result<FileIdentity> identity() const;
  // pwrite at an offset; extends the file. Errors: storage_exhausted (ENOSPC), io.
  Status write_at(uint64_t offset, std::span<const uint8_t> bytes);
  // pread; returns the bytes read (fewer at end of file). Errors: io.
  Result<uint64_t> read_at(uint64_t offset, std::span<uint8_t> out) const;
  // Sizes the file to `bytes` and allocates every page now. Fails with
  // storage_exhausted, before any page is touched, when the filesystem
  // (fstatvfs) or physical memory cannot hold it, or when posix_fallocate
  // reports ENOSPC/EFBIG; otherwise a sparse segment would die with SIGBUS on
  // first touch (docs/stack-notes.md).
  Status reserve(uint64_t bytes);
  // Maps the whole file (MAP_SHARED). Errors: io.
  Result<std::span<uint8_t>> map(bool writable);
  // Makes the first `bytes` of the mapping read-only (the published header).
  Status protect_prefix(uint64_t bytes);
  // True when `name` still refers to this very file (same device and inode);
  // false for an unnamed segment.
  bool name_refers_here() const;

 private:
  struct Impl;
  explicit SegmentFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt::shm
