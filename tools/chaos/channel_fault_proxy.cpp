#include "tools/chaos/channel_fault_proxy.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "services/session/channel_frame.hpp"

namespace kvrt::chaos {

std::string_view to_string(TransportFaultKind kind) {
  constexpr std::array<std::string_view, kTransportFaultKindCount> names{"delay",      "duplicate", "drop_request",
                                                                         "drop_reply", "truncate",  "close"};
  return names.at(static_cast<size_t>(kind));
}

namespace {

// Writes all of `bytes`; false when the peer is gone.
bool send_all(int fd, const uint8_t* bytes, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, bytes, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    bytes += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Which frames a fault is for: the next one either way, the next request,
// or the next reply.
bool applies(TransportFaultKind kind, bool request) {
  switch (kind) {
    case TransportFaultKind::duplicate:
    case TransportFaultKind::drop_request:
      return request;
    case TransportFaultKind::drop_reply:
      return !request;
    default:
      return true;
  }
}

}  // namespace

ChannelFaultProxy::ChannelFaultProxy(int listen_fd, int wake_fd, std::string listen_path, std::string target)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), listen_path_(std::move(listen_path)), target_(std::move(target)) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

Result<std::unique_ptr<ChannelFaultProxy>> ChannelFaultProxy::start(const std::string& listen_path,
                                                                    std::string target) {
  sockaddr_un addr{};
  if (listen_path.size() >= sizeof(addr.sun_path))
    return make_error(ErrorCode::invalid_argument, "socket path " + listen_path + " is too long", "listen_path");
  std::error_code ec;
  std::filesystem::remove(listen_path, ec);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::io, std::string("socket: ") + std::strerror(errno), "listen_path");
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, listen_path.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::io, "cannot listen on " + listen_path + ": " + std::strerror(e), "listen_path");
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    ::close(fd);
    return make_error(ErrorCode::io, std::string("eventfd: ") + std::strerror(errno), "listen_path");
  }
  return std::unique_ptr<ChannelFaultProxy>(new ChannelFaultProxy(fd, wake, listen_path, std::move(target)));
}

ChannelFaultProxy::~ChannelFaultProxy() {
  stopping_ = true;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (acceptor_.joinable()) acceptor_.join();
  reap_relays(/*all=*/true);
  ::close(listen_fd_);
  ::close(wake_fd_);
  std::error_code ec;
  std::filesystem::remove(listen_path_, ec);
}

void ChannelFaultProxy::arm(int pid, TransportFault fault) {
  std::lock_guard lock(mutex_);
  armed_[pid] = fault;
}

void ChannelFaultProxy::disarm(int pid) {
  std::lock_guard lock(mutex_);
  armed_.erase(pid);
}

ChannelProxyStats ChannelFaultProxy::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::optional<TransportFault> ChannelFaultProxy::take(int pid) {
  std::lock_guard lock(mutex_);
  const auto it = armed_.find(pid);
  if (it == armed_.end()) return std::nullopt;
  const TransportFault f = it->second;
  armed_.erase(it);
  return f;
}

void ChannelFaultProxy::reap_relays(bool all) {
  for (auto it = relays_.begin(); it != relays_.end();) {
    if (all || it->done.load()) {
      it->thread.join();
      it = relays_.erase(it);
    } else {
      ++it;
    }
  }
}

void ChannelFaultProxy::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, 100) < 0 && errno != EINTR) return;
    reap_relays(/*all=*/false);
    if (stopping_ || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ucred peer{};
    socklen_t len = sizeof(peer);
    const int pid = ::getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 ? peer.pid : -1;
    Relay& r = relays_.emplace_back();
    r.thread = std::thread([this, client, pid, &r] {
      relay(client, pid);
      r.done = true;
    });
  }
}

// One connection: whole frames both ways, and at most one fault after the
// attach. Ends when either side closes, the fault cut it, or the proxy stops.
void ChannelFaultProxy::relay(int client_fd, int pid) {
  const int node_fd = connect_unix(target_);
  {
    std::lock_guard lock(mutex_);
    ++stats_.connections;
    if (node_fd < 0) ++stats_.refused_targets;
  }
  if (node_fd < 0) {
    ::close(client_fd);
    return;
  }
  struct Direction {
    int from, to;
    bool request;
    std::vector<uint8_t> buffer;
  };
  Direction dirs[2] = {{client_fd, node_fd, true, {}}, {node_fd, client_fd, false, {}}};
  bool attached = false, faulted = false;
  std::optional<TransportFault> pending;
  auto count = [&](TransportFaultKind k) {
    std::lock_guard lock(mutex_);
    ++stats_.applied[static_cast<size_t>(k)];
  };
  bool open = true;
  while (open && !stopping_) {
    pollfd fds[3] = {{client_fd, POLLIN, 0}, {node_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 3, 200) < 0 && errno != EINTR) break;
    if (fds[2].revents & POLLIN) break;
    for (int d = 0; d < 2 && open; ++d) {
      if (!(fds[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Direction& dir = dirs[d];
      uint8_t chunk[64 * 1024];
      const ssize_t got = ::recv(dir.from, chunk, sizeof(chunk), 0);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        open = false;
        break;
      }
      dir.buffer.insert(dir.buffer.end(), chunk, chunk + got);
      // Every whole frame in the buffer, in order.
      while (open && dir.buffer.size() >= kChannelHeaderBytes) {
        Result<ChannelFrameHeader> h = read_channel_header(std::span(dir.buffer).first(kChannelHeaderBytes));
        if (!h.ok()) {  // not a frame stream: cut, as the node would
          open = false;
          break;
        }
        const size_t frame = kChannelHeaderBytes + h->payload_bytes;
        if (dir.buffer.size() < frame) break;
        bool forward = true, twice = false;
        if (dir.request && !attached) {
          attached = true;  // the attach frame is never faulted
        } else if (!faulted) {
          if (!pending) pending = take(pid);
          if (pending && applies(pending->kind, dir.request)) {
            faulted = true;
            count(pending->kind);
            switch (pending->kind) {
              case TransportFaultKind::delay: {
                pollfd w{wake_fd_, POLLIN, 0};
                (void)::poll(&w, 1, static_cast<int>(pending->delay_ms));
                break;
              }
              case TransportFaultKind::duplicate:
                twice = true;
                break;
              case TransportFaultKind::drop_request:
              case TransportFaultKind::drop_reply:
                forward = false;
                break;
              case TransportFaultKind::truncate:
                (void)send_all(dir.to, dir.buffer.data(), kChannelHeaderBytes + h->payload_bytes / 2);
                open = false;
                forward = false;
                break;
              case TransportFaultKind::close:
                open = false;
                forward = false;
                break;
            }
          }
        }
        if (forward) {
          for (int k = 0; k < (twice ? 2 : 1) && open; ++k) open = send_all(dir.to, dir.buffer.data(), frame);
          std::lock_guard lock(mutex_);
          ++stats_.frames_forwarded;
        }
        dir.buffer.erase(dir.buffer.begin(), dir.buffer.begin() + static_cast<std::ptrdiff_t>(frame));
      }
    }
  }
  ::shutdown(client_fd, SHUT_RDWR);
  ::shutdown(node_fd, SHUT_RDWR);
  ::close(client_fd);
  ::close(node_fd);
}

}  // namespace kvrt::chaos
