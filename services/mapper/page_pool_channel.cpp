#include "services/mapper/page_pool_channel.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "services/common/scm_rights.hpp"
#include "services/common/unique_fd.hpp"

namespace kvrt {
namespace {

// Wire layout of one message: WireHeader, then entry_count WireEntry.
struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t page_group_bytes;  // G [bytes]
  uint64_t handle_count;      // N_handle [handles]
  uint64_t pool_generation;
  uint32_t view_pages;   // [pages]
  uint32_t entry_count;  // [entries following]
};
struct WireEntry {
  uint32_t virtual_page;
  uint32_t reserved;
  uint64_t handle;
};
static_assert(sizeof(WireHeader) == 40 && sizeof(WireEntry) == 16, "wire layout has no padding");

Error os_error(const char* call, int err) {
  return make_error(ErrorCode::io, std::string(call) + ": " + std::strerror(err), call);
}

uint64_t os_page_bytes() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

Status require_seqpacket(int socket_fd) {
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(socket_fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return os_error("getsockopt(SO_TYPE)", errno);
  if (type != SOCK_SEQPACKET)
    return make_error(ErrorCode::invalid_argument,
                      "page-pool channel needs a SOCK_SEQPACKET socket (message boundaries)", "socket_type");
  return Status::success();
}

// The page table must fit the view and the pool, one handle per view page.
// `in_message`: the table travels in one SCM_RIGHTS message and is bounded by
// its fixed receive buffer; a table a process maps locally is not.
Status validate_pages(const PagePoolIdentity& identity, uint32_t view_pages, const std::vector<ViewPage>& pages,
                      bool in_message = true) {
  if (view_pages == 0) return make_error(ErrorCode::invalid_argument, "a view has at least one page", "view_pages");
  if (in_message && pages.size() > kPagePoolMaxEntries)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(pages.size()) + " entries > " + std::to_string(kPagePoolMaxEntries), "pages");
  std::set<uint32_t> seen;
  for (const ViewPage& p : pages) {
    if (p.virtual_page >= view_pages)
      return make_error(
          ErrorCode::coordinate_out_of_range,
          "virtual page " + std::to_string(p.virtual_page) + " >= view of " + std::to_string(view_pages) + " pages",
          "virtual_page");
    if (p.handle >= identity.handle_count)
      return make_error(ErrorCode::coordinate_out_of_range,
                        "handle " + std::to_string(p.handle) + " >= N_handle " + std::to_string(identity.handle_count),
                        "handle");
    if (!seen.insert(p.virtual_page).second)
      return make_error(ErrorCode::invalid_argument, "virtual page " + std::to_string(p.virtual_page) + " mapped twice",
                        "virtual_page");
  }
  return Status::success();
}

}  // namespace

std::vector<ViewPage> view_pages_from_receipts(const MapperGeometry& geometry,
                                               const std::vector<MappedFrontierReceipt>& receipts) {
  const uint64_t g = geometry.config().page_group_bytes;
  std::vector<ViewPage> pages;
  for (const MappedFrontierReceipt& r : receipts)
    for (const PageMapping& m : r.new_mappings) {
      const uint64_t offset =
          geometry.page_offset(geometry.tensor_index(m.local_layer, m.tensor), r.request_slot.value, m.page_index);
      pages.push_back(ViewPage{static_cast<uint32_t>(offset / g), m.handle.value});
    }
  return pages;
}

std::vector<std::byte> encode_page_pool_message(const PagePoolOffer& offer) {
  std::vector<std::byte> payload(sizeof(WireHeader) + offer.pages.size() * sizeof(WireEntry));
  const WireHeader header{kPagePoolMagic,
                          kPagePoolWireVersion,
                          0,
                          offer.identity.page_group_bytes,
                          offer.identity.handle_count,
                          offer.identity.generation.value,
                          offer.view_pages,
                          static_cast<uint32_t>(offer.pages.size())};
  std::memcpy(payload.data(), &header, sizeof header);
  for (size_t i = 0; i < offer.pages.size(); ++i) {
    const WireEntry e{offer.pages[i].virtual_page, 0, offer.pages[i].handle};
    std::memcpy(payload.data() + sizeof header + i * sizeof e, &e, sizeof e);
  }
  return payload;
}

Status validate_page_pool_offer(const PagePoolOffer& offer) {
  return validate_pages(offer.identity, offer.view_pages, offer.pages);
}

Status send_page_pool(int socket_fd, int pool_fd, const PagePoolOffer& offer) {
  KVRT_TRY(require_seqpacket(socket_fd));
  if (pool_fd < 0) return make_error(ErrorCode::invalid_argument, "no pool fd to send", "pool_fd");
  KVRT_TRY(validate_pages(offer.identity, offer.view_pages, offer.pages));
  std::vector<std::byte> payload = encode_page_pool_message(offer);
  iovec iov{payload.data(), payload.size()};
  alignas(cmsghdr) std::byte control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  attach_scm_rights(msg, control, std::span<const int>(&pool_fd, 1));
  ssize_t sent;
  do sent = sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) return os_error("sendmsg", errno);
  return Status::success();
}

ReceivedPagePool::ReceivedPagePool(ReceivedPagePool&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), offer_(std::move(other.offer_)) {}

ReceivedPagePool& ReceivedPagePool::operator=(ReceivedPagePool&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offer_ = std::move(other.offer_);
  }
  return *this;
}

ReceivedPagePool::~ReceivedPagePool() {
  if (fd_ >= 0) close(fd_);
}

Result<PagePoolOffer> parse_page_pool_message(std::span<const std::byte> bytes, bool truncated,
                                              const PagePoolIdentity& expected) {
  if (bytes.size() < sizeof(WireHeader))
    return make_error(ErrorCode::pool_message_truncated,
                      std::to_string(bytes.size()) + " B < header of " + std::to_string(sizeof(WireHeader)) + " B",
                      "header");
  WireHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.magic != kPagePoolMagic || header.version != kPagePoolWireVersion)
    return make_error(ErrorCode::pool_message_bad_magic, "not a page-pool message (magic or version)", "magic");
  if (truncated || header.entry_count > kPagePoolMaxEntries)
    return make_error(ErrorCode::pool_message_truncated,
                      "message exceeds " + std::to_string(kPagePoolMaxEntries) + " entries", "entry_count");
  if (bytes.size() != sizeof(WireHeader) + uint64_t{header.entry_count} * sizeof(WireEntry))
    return make_error(ErrorCode::pool_message_truncated,
                      std::to_string(bytes.size()) + " B do not hold the " + std::to_string(header.entry_count) +
                          " entries the header announces",
                      "entry_count");
  if (header.page_group_bytes != expected.page_group_bytes || header.handle_count != expected.handle_count)
    return make_error(ErrorCode::incompatible,
                      "pool of " + std::to_string(header.handle_count) + " x " +
                          std::to_string(header.page_group_bytes) + " B, expected " +
                          std::to_string(expected.handle_count) + " x " + std::to_string(expected.page_group_bytes) +
                          " B",
                      header.page_group_bytes != expected.page_group_bytes ? "page_group_bytes" : "handle_count");
  if (header.pool_generation != expected.generation.value)
    return make_error(ErrorCode::stale_generation,
                      "pool generation " + std::to_string(header.pool_generation) + ", expected " +
                          std::to_string(expected.generation.value),
                      "pool_generation");
  PagePoolOffer offer;
  offer.identity = expected;
  offer.view_pages = header.view_pages;
  offer.pages.resize(header.entry_count);
  for (uint32_t i = 0; i < header.entry_count; ++i) {
    WireEntry e;
    std::memcpy(&e, bytes.data() + sizeof header + i * sizeof e, sizeof e);
    offer.pages[i] = ViewPage{e.virtual_page, e.handle};
  }
  return offer;
}

Result<ReceivedPagePool> receive_page_pool(int socket_fd, const PagePoolIdentity& expected) {
  KVRT_TRY(require_seqpacket(socket_fd));
  std::vector<std::byte> payload(sizeof(WireHeader) + kPagePoolMaxEntries * sizeof(WireEntry));
  iovec iov{payload.data(), payload.size()};
  // Room for several fds, so a sender passing more than one is seen and every one closed.
  alignas(cmsghdr) std::byte control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do got = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  if (got < 0) return os_error("recvmsg", errno);

  std::vector<int> fds = scm_rights_fds(std::span<const std::byte>(control, msg.msg_controllen));
  // Every rejection closes what was received.
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || fds.size() != 1) {
    close_all();
    return make_error(ErrorCode::pool_fd_missing,
                      "expected exactly one SCM_RIGHTS fd, got " + std::to_string(fds.size()) +
                          ((msg.msg_flags & MSG_CTRUNC) != 0 ? " (control data cut)" : ""),
                      "pool_fd");
  }
  UniqueFd pool{fds[0]};
  Result<PagePoolOffer> offer = parse_page_pool_message(
      std::span<const std::byte>(payload.data(), static_cast<size_t>(got)), (msg.msg_flags & MSG_TRUNC) != 0, expected);
  if (!offer.ok()) return offer.error();
  // The fd must be the pool the header describes, and sealed: a pool that
  // could shrink under a MAP_SHARED mapping would turn a read into SIGBUS.
  struct stat st {};
  if (fstat(pool.get(), &st) != 0) return os_error("fstat", errno);
  const uint64_t pool_bytes = expected.handle_count * expected.page_group_bytes;
  if (static_cast<uint64_t>(st.st_size) != pool_bytes)
    return make_error(ErrorCode::pool_size_mismatch,
                      "fd holds " + std::to_string(st.st_size) +
                          " B, header says N_handle x G = " + std::to_string(pool_bytes) + " B",
                      "pool_fd");
  const int seals = fcntl(pool.get(), F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return make_error(ErrorCode::pool_size_mismatch, "pool fd is not sealed against shrink and grow", "seals");
  KVRT_TRY(validate_page_pool_offer(*offer));
  return ReceivedPagePool(pool.release(), std::move(offer).value());
}

Result<PoolView> PoolView::map(int pool_fd, const PagePoolIdentity& identity, uint32_t view_pages,
                               const std::vector<ViewPage>& pages) {
  const uint64_t g = identity.page_group_bytes;
  if (g == 0 || g % os_page_bytes() != 0)
    return make_error(
        ErrorCode::config_field,
        "G = " + std::to_string(g) + " B is not a multiple of the OS page (" + std::to_string(os_page_bytes()) + " B)",
        "page_group_bytes");
  KVRT_TRY(validate_pages(identity, view_pages, pages));
  const uint64_t bytes = uint64_t{view_pages} * g;
  void* reserved = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED)
    return make_error(ErrorCode::os_mapping_failed, std::string("mmap(reserve): ") + std::strerror(errno), "mmap");
  PoolView view(static_cast<std::byte*>(reserved), bytes);  // unmaps everything if a page fails below
  for (const ViewPage& p : pages) {
    void* at = mmap(view.base_ + uint64_t{p.virtual_page} * g, g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                    pool_fd, static_cast<off_t>(p.handle * g));
    if (at == MAP_FAILED)
      return make_error(ErrorCode::os_mapping_failed, std::string("mmap(map): ") + std::strerror(errno), "mmap");
  }
  return view;
}

Status PoolView::map_pages(int pool_fd, const PagePoolIdentity& identity, const std::vector<ViewPage>& pages) {
  const uint64_t g = identity.page_group_bytes;
  if (base_ == nullptr) return make_error(ErrorCode::invalid_argument, "the view is not mapped", "view");
  if (g == 0 || bytes_ % g != 0)
    return make_error(ErrorCode::incompatible, "G = " + std::to_string(g) + " B does not tile this view",
                      "page_group_bytes");
  KVRT_TRY(validate_pages(identity, static_cast<uint32_t>(bytes_ / g), pages, /*in_message=*/false));
  for (const ViewPage& p : pages) {
    void* at = mmap(base_ + uint64_t{p.virtual_page} * g, g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, pool_fd,
                    static_cast<off_t>(p.handle * g));
    if (at == MAP_FAILED)
      return make_error(ErrorCode::os_mapping_failed, std::string("mmap(map): ") + std::strerror(errno), "mmap");
  }
  return Status::success();
}

PoolView::PoolView(PoolView&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PoolView& PoolView::operator=(PoolView&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PoolView::~PoolView() { reset(); }

void PoolView::reset() {
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

}  // namespace kvrt
