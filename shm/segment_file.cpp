#include "shm/segment_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstring>
#include <optional>

namespace kvrt::shm {
namespace bip = boost::interprocess;

namespace {

std::string system_message(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

Error from_boost(const bip::interprocess_exception& e, const std::string& what) {
  return make_error(ErrorCode::io, what + ": " + e.what(), "segment");
}

bool is_capacity_errno(int err) { return err == ENOSPC || err == EFBIG || err == ENOMEM; }

// What bip::mapped_region maps: any descriptor, named or not, so both kinds
// of segment are mapped one way.
struct DescriptorMappable {
  int fd = -1;
  bip::mapping_handle_t get_mapping_handle() const { return bip::ipcdetail::mapping_handle_from_file_handle(fd); }
};

}  // namespace

struct SegmentFile::Impl {
  std::string name;               // the POSIX name, or the label of an unnamed segment
  bip::shared_memory_object shm;  // a named segment's object (empty for an unnamed one)
  UniqueFd unnamed;               // an unnamed segment's memfd
  std::optional<bip::mapped_region> region;
  int fd() const { return unnamed ? unnamed.get() : shm.get_mapping_handle().handle; }
};

namespace {

// The seals that keep an unnamed segment's size fixed for every holder of its
// descriptor: a worker that shrank it would turn the node's next touch of
// the cut pages into SIGBUS.
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

}  // namespace

SegmentFile::SegmentFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentFile::SegmentFile(SegmentFile&&) noexcept = default;
SegmentFile& SegmentFile::operator=(SegmentFile&&) noexcept = default;
SegmentFile::~SegmentFile() = default;  // unmaps, then closes the descriptor

const std::string& SegmentFile::name() const { return impl_->name; }

Result<SegmentFile> SegmentFile::create(std::string_view name) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::string(name);
  try {
    bip::permissions owner_only;
    owner_only.set_permissions(0600);
    impl->shm = bip::shared_memory_object(bip::create_only, impl->name.c_str(), bip::read_write, owner_only);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::already_exists_error)
      return make_error(ErrorCode::segment_in_use, "a shared-memory segment named " + impl->name + " already exists",
                        "segment");
    return from_boost(e, "cannot create shared-memory segment " + impl->name);
  }
  return SegmentFile(std::move(impl));
}

Result<SegmentFile> SegmentFile::create_unnamed(std::string_view label) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::string(label);
  impl->unnamed.reset(::memfd_create(impl->name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!impl->unnamed)
    return make_error(
        is_capacity_errno(errno) || errno == EMFILE || errno == ENFILE ? ErrorCode::storage_exhausted : ErrorCode::io,
        "cannot create unnamed segment " + impl->name + ": memfd_create: " + system_message(errno), "segment");
  return SegmentFile(std::move(impl));
}

Result<SegmentFile> SegmentFile::adopt(UniqueFd descriptor, std::string_view label) {
  if (!descriptor)
    return make_error(ErrorCode::invalid_argument, "no descriptor for segment " + std::string(label), "segment");
  struct stat st {};
  if (::fstat(descriptor.get(), &st) != 0)
    return make_error(ErrorCode::io, "fstat of segment " + std::string(label) + " failed: " + system_message(errno),
                      "segment");
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorCode::decode_failed, "the descriptor of segment " + std::string(label) + " is not a file",
                      "segment");
  auto impl = std::make_unique<Impl>();
  impl->name = std::string(label);
  impl->unnamed = std::move(descriptor);
  return SegmentFile(std::move(impl));
}

bool SegmentFile::unnamed() const { return static_cast<bool>(impl_->unnamed); }
int SegmentFile::descriptor() const { return impl_->fd(); }

Status SegmentFile::seal_size() {
  if (::fcntl(impl_->fd(), F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0)
    return make_error(ErrorCode::io, "cannot seal segment " + impl_->name + ": " + system_message(errno), "segment");
  return Status::success();
}

bool SegmentFile::size_sealed() const {
  const int seals = ::fcntl(impl_->fd(), F_GET_SEALS);
  return seals >= 0 && (seals & kSizeSeals) == kSizeSeals;
}

Result<SegmentFile> SegmentFile::open(std::string_view name, bool writable) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::string(name);
  try {
    impl->shm =
        bip::shared_memory_object(bip::open_only, impl->name.c_str(), writable ? bip::read_write : bip::read_only);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::not_found_error)
      return make_error(ErrorCode::io, "no shared-memory segment named " + impl->name + " (missing)", "segment");
    return from_boost(e, "cannot open shared-memory segment " + impl->name);
  }
  return SegmentFile(std::move(impl));
}

Status SegmentFile::unlink(std::string_view name) {
  const std::string n(name);
  if (!bip::shared_memory_object::remove(n.c_str()))
    return make_error(ErrorCode::io, "cannot remove shared-memory segment " + n + " (missing or not permitted)",
                      "segment");
  return Status::success();
}

Result<uint64_t> SegmentFile::size() const {
  struct stat st {};
  if (::fstat(impl_->fd(), &st) != 0)
    return make_error(ErrorCode::io, "fstat of " + impl_->name + " failed: " + system_message(errno), "segment");
  return static_cast<uint64_t>(st.st_size);
}

Result<FileIdentity> SegmentFile::identity() const {
  struct stat st {};
  if (::fstat(impl_->fd(), &st) != 0)
    return make_error(ErrorCode::io, "fstat of " + impl_->name + " failed: " + system_message(errno), "segment");
  return FileIdentity{st.st_dev, st.st_ino};
}

Status SegmentFile::write_at(uint64_t offset, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(impl_->fd(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      return make_error(is_capacity_errno(err) ? ErrorCode::storage_exhausted : ErrorCode::io,
                        "pwrite to " + impl_->name + " failed: " + system_message(err), "segment");
    }
    done += static_cast<size_t>(n);
  }
  return Status::success();
}

Result<uint64_t> SegmentFile::read_at(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(impl_->fd(), out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return make_error(ErrorCode::io, "pread from " + impl_->name + " failed: " + system_message(errno), "segment");
    if (n == 0) break;  // end of file
    done += static_cast<size_t>(n);
  }
  return uint64_t{done};
}

Status SegmentFile::reserve(uint64_t bytes) {
  const auto exhausted = [&](const std::string& why) {
    return make_error(ErrorCode::storage_exhausted,
                      "segment " + impl_->name + " needs " + std::to_string(bytes) + " bytes: " + why, "capacity");
  };
  // Cheap refusals first, so that a hopeless size never reaches the allocator
  // of a tmpfs without a size limit (f_blocks == 0), which would try to find
  // the pages in RAM. Note a memory cgroup can still be smaller than both.
  struct statvfs vfs {};
  if (::fstatvfs(impl_->fd(), &vfs) == 0 && vfs.f_blocks > 0) {
    const unsigned __int128 available = static_cast<unsigned __int128>(vfs.f_bavail) * vfs.f_frsize;
    if (bytes > available)
      return exhausted("the shared-memory filesystem has " + std::to_string(static_cast<uint64_t>(available)) +
                       " bytes free");
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && bytes > static_cast<unsigned __int128>(pages) * static_cast<uint64_t>(page))
    return exhausted("the host has " + std::to_string(static_cast<uint64_t>(pages) * page) + " bytes of memory");
  if (bytes > static_cast<uint64_t>(INT64_MAX)) return exhausted("the size exceeds off_t");

  if (::ftruncate(impl_->fd(), static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    if (is_capacity_errno(err)) return exhausted("ftruncate: " + system_message(err));
    return make_error(ErrorCode::io, "cannot size segment " + impl_->name + ": " + system_message(err), "segment");
  }
  int rc;
  do rc = ::posix_fallocate(impl_->fd(), 0, static_cast<off_t>(bytes));
  while (rc == EINTR);
  if (rc != 0) {
    if (is_capacity_errno(rc)) return exhausted("posix_fallocate: " + system_message(rc));
    return make_error(ErrorCode::io, "posix_fallocate on " + impl_->name + " failed: " + system_message(rc), "segment");
  }
  return Status::success();
}

Result<std::span<uint8_t>> SegmentFile::map(bool writable) {
  uint64_t bytes = 0;
  KVRT_TRY_ASSIGN(bytes, size());
  if (bytes == 0) return make_error(ErrorCode::decode_failed, "segment " + impl_->name + " is empty", "segment_bytes");
  try {
    impl_->region.emplace(DescriptorMappable{impl_->fd()}, writable ? bip::read_write : bip::read_only, 0,
                          static_cast<std::size_t>(bytes));
  } catch (const bip::interprocess_exception& e) {
    return from_boost(e, "cannot map segment " + impl_->name);
  }
  return std::span<uint8_t>(static_cast<uint8_t*>(impl_->region->get_address()), impl_->region->get_size());
}

Status SegmentFile::protect_prefix(uint64_t bytes) {
  KVRT_ASSERT(impl_->region.has_value(), "protect_prefix before map");
  const long page = ::sysconf(_SC_PAGESIZE);
  // Only whole pages can be protected; on a system whose pages are larger
  // than the header region the header stays writable (nothing else breaks).
  if (page <= 0 || bytes % static_cast<uint64_t>(page) != 0) return Status::success();
  if (::mprotect(impl_->region->get_address(), bytes, PROT_READ) != 0)
    return make_error(ErrorCode::io, "mprotect of the header of " + impl_->name + " failed: " + system_message(errno),
                      "segment");
  return Status::success();
}

bool SegmentFile::name_refers_here() const {
  if (unnamed()) return false;
  auto mine = identity();
  if (!mine.ok()) return false;
  auto current = open(impl_->name, /*writable=*/false);
  if (!current.ok()) return false;
  auto theirs = current->identity();
  return theirs.ok() && *theirs == *mine;
}

}  // namespace kvrt::shm
