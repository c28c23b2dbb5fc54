#include "services/mapper/page_pool_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "services/common/unix_socket_address.hpp"

namespace kvrt {
namespace {

Error os_error(const std::string& what) { return make_error(ErrorCode::io, what + ": " + std::strerror(errno), what); }

}  // namespace

Result<std::unique_ptr<PagePoolServer>> PagePoolServer::start(const std::string& socket_path, int pool_fd,
                                                              PagePoolOffer offer) {
  auto addr = unix_socket_address(socket_path, "socket_path");
  if (!addr.ok()) return addr.error();
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return os_error("socket");
  ::unlink(socket_path.c_str());  // a stale socket of an earlier node
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 || ::listen(fd, 16) != 0) {
    Error e = os_error("bind " + socket_path);
    ::close(fd);
    return e;
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    Error e = os_error("pipe");
    ::close(fd);
    ::unlink(socket_path.c_str());
    return e;
  }
  return std::unique_ptr<PagePoolServer>(
      new PagePoolServer(socket_path, fd, wake[0], wake[1], pool_fd, std::move(offer)));
}

PagePoolServer::PagePoolServer(std::string path, int listen_fd, int wake_read, int wake_write, int pool_fd,
                               PagePoolOffer offer)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      pool_fd_(pool_fd),
      offer_(std::move(offer)),
      thread_([this] { serve(); }) {}

PagePoolServer::~PagePoolServer() {
  const char stop = 1;
  (void)!::write(wake_write_, &stop, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
  ::unlink(path_.c_str());
}

void PagePoolServer::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    ucred peer{};
    socklen_t len = sizeof(peer);
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::getuid()) {
      ++refused_;
    } else if (send_page_pool(conn, pool_fd_, offer_).ok()) {
      ++served_;
    } else {
      ++refused_;
    }
    ::close(conn);
  }
}

Result<ReceivedPagePool> fetch_page_pool(const std::string& socket_path, const PagePoolIdentity& expected) {
  auto addr = unix_socket_address(socket_path, "socket_path");
  if (!addr.ok()) return addr.error();
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return os_error("socket");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    // No socket, or nobody listening on it: the node that serves the pool
    // is gone or not serving yet, as for the session channel's connect.
    const bool no_node = errno == ECONNREFUSED || errno == ENOENT;
    Error e = no_node ? make_error(ErrorCode::node_unreachable,
                                   "cannot reach the page-pool channel at " + socket_path + ": " + std::strerror(errno),
                                   "socket_path")
                      : os_error("connect " + socket_path);
    ::close(fd);
    return e;
  }
  Result<ReceivedPagePool> pool = receive_page_pool(fd, expected);
  ::close(fd);
  return pool;
}

}  // namespace kvrt
