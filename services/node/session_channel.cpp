#include "services/node/session_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvrt {

namespace {

using Clock = std::chrono::steady_clock;

// Reads exactly `n` bytes before `deadline`. 0 on success, else the errno
// (ETIMEDOUT past the deadline, ECONNRESET when the peer closed).
int read_exact(int fd, uint8_t* out, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return ECONNRESET;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ETIMEDOUT;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) return errno;
    if (ready == 0) return ETIMEDOUT;
  }
  return 0;
}

// Writes the header and the payload with as few system calls as the socket
// allows (one, unless its buffer fills).
int write_frame(int fd, const ChannelHeaderBytes& header, std::span<const uint8_t> payload,
                Clock::time_point deadline) {
  iovec parts[2] = {{const_cast<uint8_t*>(header.data()), header.size()},
                    {const_cast<uint8_t*>(payload.data()), payload.size()}};
  size_t first = 0;
  while (first < 2) {
    msghdr m{};
    m.msg_iov = parts + first;
    m.msg_iovlen = 2 - first;
    const ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return ETIMEDOUT;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30))) == 0) return ETIMEDOUT;
      continue;
    }
    size_t written = static_cast<size_t>(w);
    while (first < 2 && written >= parts[first].iov_len) written -= parts[first++].iov_len;
    if (first < 2) {
      parts[first].iov_base = static_cast<uint8_t*>(parts[first].iov_base) + written;
      parts[first].iov_len -= written;
    }
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<SessionChannel>> SessionChannel::attach(const std::string& socket_path, const std::string& ticket,
                                                               std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path))
    return make_error(ErrorCode::invalid_argument, "channel socket path of " + std::to_string(socket_path.size()) +
                                                       " bytes does not fit a socket address: " + socket_path,
                      "channel_socket");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::node_unreachable, std::string("socket: ") + std::strerror(errno), "channel");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::node_unreachable,
                      "cannot reach the session channel at " + socket_path + ": " + std::strerror(e), "channel");
  }
  std::unique_ptr<SessionChannel> channel(new SessionChannel(fd));
  const std::span<const uint8_t> payload(reinterpret_cast<const uint8_t*>(ticket.data()), ticket.size());
  Result<std::vector<uint8_t>> reply = channel->call(ChannelRoute::attach, payload, timeout);
  if (!reply.ok()) return reply.error();
  // The node answers an accepted ticket with nothing, a refused one with its reason.
  if (!reply->empty())
    return make_error(ErrorCode::session_ended,
                      "the node refused the session channel: " + std::string(reply->begin(), reply->end()), "channel");
  return channel;
}

SessionChannel::~SessionChannel() {
  if (fd_ >= 0) ::close(fd_);
}

Error SessionChannel::fail(ErrorCode code, const std::string& reason) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return make_error(code, reason, "channel");
}

Result<std::vector<uint8_t>> SessionChannel::call(ChannelRoute route, std::span<const uint8_t> payload,
                                                  std::chrono::milliseconds timeout) {
  if (fd_ < 0)
    return make_error(ErrorCode::rpc_failed, "the session channel is broken by an earlier failure", "channel");
  if (payload.size() > kChannelMaxPayloadBytes)
    return make_error(ErrorCode::invalid_argument,
                      "a request of " + std::to_string(payload.size()) + " bytes exceeds the channel's frame limit",
                      "payload");
  const Clock::time_point deadline = Clock::now() + timeout;
  const ChannelFrameHeader request{static_cast<uint32_t>(payload.size()), route, next_sequence_++};
  if (const int e = write_frame(fd_, write_channel_header(request), payload, deadline); e != 0)
    return fail(e == ETIMEDOUT ? ErrorCode::rpc_timeout : ErrorCode::rpc_failed,
                std::string(to_string(route)) + ": cannot send: " + std::strerror(e));
  ChannelHeaderBytes header_bytes{};
  if (const int e = read_exact(fd_, header_bytes.data(), header_bytes.size(), deadline); e != 0)
    return fail(e == ETIMEDOUT ? ErrorCode::rpc_timeout : ErrorCode::rpc_failed,
                std::string(to_string(route)) + (e == ETIMEDOUT ? ": no reply in time" : ": the node closed the channel"));
  Result<ChannelFrameHeader> reply = read_channel_header(header_bytes);
  if (!reply.ok()) return fail(ErrorCode::rpc_failed, "malformed reply header: " + reply.error().reason);
  if (reply->sequence != request.sequence || reply->route != request.route)
    return fail(ErrorCode::rpc_failed, "reply " + std::to_string(reply->sequence) + " (" + to_string(reply->route) +
                                           ") answers no outstanding request (" + std::to_string(request.sequence) +
                                           ", " + to_string(route) + ")");
  std::vector<uint8_t> out(reply->payload_bytes);
  if (const int e = read_exact(fd_, out.data(), out.size(), deadline); e != 0)
    return fail(e == ETIMEDOUT ? ErrorCode::rpc_timeout : ErrorCode::rpc_failed,
                std::string(to_string(route)) + ": reply cut short: " + std::strerror(e));
  return out;
}

}  // namespace kvrt
