#pragma once
// Cross-process sharing of the mapper's page pool: a worker process
// reproduces the same contiguous view in its own address space from the
// same handles (0x06B). The node sends the sealed memfd of a
// MemfdBacking over a connected AF_UNIX SOCK_SEQPACKET socket as SCM_RIGHTS,
// in ONE message together with a fixed header and the page table of the view
// (virtual page index -> handle). SOCK_SEQPACKET keeps message boundaries, so a
// short or oversized message is detected exactly instead of being resplit.
// The worker checks the header against what its own configuration expects
// (G, N_handle, pool generation) and the fd against the header (fstat size,
// shrink/grow seals), then rebuilds the contiguous view: reserve PROT_NONE,
// then mmap(MAP_FIXED|MAP_SHARED, fd, handle*G) page by page (0x06B, 0x06C).
// Wire integers are native-endian: an fd can only travel between processes of
// one host.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/common/scm_rights.hpp"
#include "services/mapper/mapper_geometry.hpp"

namespace kvrt {

inline constexpr uint32_t kPagePoolMagic = 0x4B56504Cu;  // "KVPL"
inline constexpr uint16_t kPagePoolWireVersion = 1;
// Upper bound on page-table entries in one message, so the receive buffer is
// fixed (16 B per entry: 64 KiB at most).
inline constexpr uint32_t kPagePoolMaxEntries = 4096;

// Which pool a message describes; the receiver states what it expects.
struct PagePoolIdentity {
  uint64_t page_group_bytes = 0;  // G [bytes per handle]
  uint64_t handle_count = 0;      // N_handle [handles]
  PoolGeneration generation;      // bumped whenever the node recreates its pool

  friend bool operator==(const PagePoolIdentity&, const PagePoolIdentity&) = default;
};

// One page of the receiver's view: page `virtual_page` of the view is backed
// by pool bytes [handle * G, (handle + 1) * G).
struct ViewPage {
  uint32_t virtual_page = 0;  // [pages from the view base]
  uint64_t handle = 0;        // [handle id]

  friend bool operator==(const ViewPage&, const ViewPage&) = default;
};

// Everything a worker needs to rebuild the view.
struct PagePoolOffer {
  PagePoolIdentity identity;
  uint32_t view_pages = 0;      // length of the contiguous view [pages]
  std::vector<ViewPage> pages;  // mapped pages; the rest stay PROT_NONE
};

// The page table of a MapperGeometry's whole reservation for the receipts'
// new mappings: virtual page = page_offset(tensor, slot, q) / G, so the
// worker's view has the node's layout byte for byte (0x06C).
std::vector<ViewPage> view_pages_from_receipts(const MapperGeometry& geometry,
                                               const std::vector<MappedFrontierReceipt>& receipts);

// The message's bytes, without the fd: the fixed header (magic, version, G,
// N_handle, pool generation, view pages, entry count) and one entry per page.
std::vector<std::byte> encode_page_pool_message(const PagePoolOffer& offer);

// The byte-level parse of one received message, before its fd is looked at:
// `truncated` says the socket cut it (MSG_TRUNC). Refusals, in this order:
// pool_message_truncated (shorter than the header), pool_message_bad_magic,
// pool_message_truncated (cut, or more entries than the header allows or
// than the bytes hold), incompatible, stale_generation. The page table is
// read but not yet checked: validate_page_pool_offer does that.
Result<PagePoolOffer> parse_page_pool_message(std::span<const std::byte> bytes, bool truncated,
                                              const PagePoolIdentity& expected);

// The page table of an offer fits its view and pool, one handle per view
// page, at most kPagePoolMaxEntries: coordinate_out_of_range or invalid_argument.
Status validate_page_pool_offer(const PagePoolOffer& offer);

// Sends `pool_fd` and the offer as one SCM_RIGHTS message. Rejects an offer
// that the receiver would reject (entry outside the view or pool, too many).
Status send_page_pool(int socket_fd, int pool_fd, const PagePoolOffer& offer);

// A received pool fd (owned, close-on-exec) and the offer that came with it.
class ReceivedPagePool {
 public:
  ReceivedPagePool() = default;
  ReceivedPagePool(int fd, PagePoolOffer offer) : fd_(fd), offer_(std::move(offer)) {}
  ReceivedPagePool(ReceivedPagePool&& other) noexcept;
  ReceivedPagePool& operator=(ReceivedPagePool&& other) noexcept;
  ReceivedPagePool(const ReceivedPagePool&) = delete;
  ReceivedPagePool& operator=(const ReceivedPagePool&) = delete;
  ~ReceivedPagePool();

  int fd() const { return fd_; }
  const PagePoolOffer& offer() const { return offer_; }

 private:
  int fd_ = -1;
  PagePoolOffer offer_;
};

// Receives one message; every failure is typed and closes any received fd:
//   pool_fd_missing (no fd / more than one / control data cut), pool_message_truncated,
//   pool_message_bad_magic, incompatible (G or N_handle differ from `expected`),
//   stale_generation (another pool generation), pool_size_mismatch (fstat, seals),
//   coordinate_out_of_range / invalid_argument (page table), io (recvmsg).
Result<ReceivedPagePool> receive_page_pool(int socket_fd, const PagePoolIdentity& expected);

// The receiver's contiguous view; unmapped on destruction.
class PoolView {
 public:
  // Validates the whole page table before any mapping (state unchanged on error).
  static Result<PoolView> map(int pool_fd, const PagePoolIdentity& identity, uint32_t view_pages,
                              const std::vector<ViewPage>& pages);
  static Result<PoolView> map(const ReceivedPagePool& pool) {
    return map(pool.fd(), pool.offer().identity, pool.offer().view_pages, pool.offer().pages);
  }
  PoolView() = default;
  PoolView(PoolView&& other) noexcept;
  PoolView& operator=(PoolView&& other) noexcept;
  PoolView(const PoolView&) = delete;
  PoolView& operator=(const PoolView&) = delete;
  ~PoolView();

  std::byte* base() const { return base_; }
  uint64_t bytes() const { return bytes_; }  // view_pages * G [bytes of address space]

  // Maps further pages into this view as a step's receipts announce them
  // (view_pages_from_receipts). The whole list is validated before the first
  // mmap, so a bad entry changes nothing. A page mapped again is remapped:
  // the node moved that virtual page to another handle.
  Status map_pages(int pool_fd, const PagePoolIdentity& identity, const std::vector<ViewPage>& pages);

 private:
  PoolView(std::byte* base, uint64_t bytes) : base_(base), bytes_(bytes) {}
  void reset();
  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace kvrt
