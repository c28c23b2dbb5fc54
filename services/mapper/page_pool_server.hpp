#pragma once
// PagePoolServer: the node's side of handing the mapper's page pool to worker
// processes, so a worker reproduces the node's contiguous view from the same
// memfd, passed over a Unix socket with SCM_RIGHTS (0x06B). A background thread
// listens on an AF_UNIX SOCK_SEQPACKET socket; each connection receives one
// message (send_page_pool): the memfd and the pool's identity, with an empty
// page table. Workers then map pages as their MappedFrontierReceipts
// announce them (PoolView::map_pages), so the server never needs the
// mapper's live state and never races its owner actor.
//
// Who may connect: the socket lives in a directory only the node's user can
// enter (the token directory, mode 0700), and the server also refuses a peer
// whose SO_PEERCRED uid differs from its own, the trust boundary of the
// node's shared-memory block pools.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "services/common/result.hpp"
#include "services/mapper/page_pool_channel.hpp"

namespace kvrt {

class PagePoolServer {
 public:
  // Binds `socket_path` (replacing a stale socket file) and starts serving.
  // Errors: invalid_argument for a path longer than sun_path, io for a
  // socket call the OS refuses.
  static Result<std::unique_ptr<PagePoolServer>> start(const std::string& socket_path, int pool_fd,
                                                       PagePoolOffer offer);
  ~PagePoolServer();  // stops the thread, removes the socket file
  PagePoolServer(const PagePoolServer&) = delete;
  PagePoolServer& operator=(const PagePoolServer&) = delete;

  uint64_t served() const { return served_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  PagePoolServer(std::string path, int listen_fd, int wake_read, int wake_write, int pool_fd, PagePoolOffer offer);
  void serve();

  std::string path_;
  int listen_fd_, wake_read_, wake_write_, pool_fd_;
  PagePoolOffer offer_;
  std::atomic<uint64_t> served_{0}, refused_{0};
  std::thread thread_;
};

// The worker's side: connects to the node's socket and receives the pool.
Result<ReceivedPagePool> fetch_page_pool(const std::string& socket_path, const PagePoolIdentity& expected);

}  // namespace kvrt
