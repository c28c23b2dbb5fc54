#include "services/session/session_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "services/common/scm_rights.hpp"
#include "services/common/unix_socket_address.hpp"

namespace kvrt {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int write_channel_frame(int fd, ChannelFrameHeader header, std::span<const uint8_t> payload,
                        std::chrono::milliseconds stall, std::span<const int> descriptors) {
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  const ChannelHeaderBytes h = write_channel_header(header);
  iovec parts[2] = {{const_cast<uint8_t*>(h.data()), h.size()}, {const_cast<uint8_t*>(payload.data()), payload.size()}};
  if (descriptors.size() > kMaxDescriptorsPerMessage) return EINVAL;
  alignas(cmsghdr) std::byte control[kDescriptorControlBytes];
  bool descriptors_sent = descriptors.empty();
  size_t first = 0;
  while (first < 2) {
    msghdr m{};
    m.msg_iov = parts + first;
    m.msg_iovlen = 2 - first;
    // The descriptors ride on the frame's first byte; the kernel delivers
    // them with whichever read takes that byte.
    if (!descriptors_sent) attach_scm_rights(m, control, descriptors);
    const ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(stall.count(), 1 << 30)));
      if (ready < 0 && errno != EINTR) return errno;
      if (ready == 0) return ETIMEDOUT;
      continue;
    }
    descriptors_sent = true;
    size_t written = static_cast<size_t>(w);
    while (first < 2 && written >= parts[first].iov_len) written -= parts[first++].iov_len;
    if (first < 2) {
      parts[first].iov_base = static_cast<uint8_t*>(parts[first].iov_base) + written;
      parts[first].iov_len -= written;
    }
  }
  return 0;
}

Result<std::unique_ptr<SessionChannel>> SessionChannel::connect(const std::string& socket_path) {
  Result<sockaddr_un> address = unix_socket_address(socket_path, "channel_socket");
  if (!address.ok()) return address.error();
  const sockaddr_un addr = *address;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::node_unreachable, std::string("socket: ") + std::strerror(errno), "channel");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::node_unreachable,
                      "cannot reach the session channel at " + socket_path + ": " + std::strerror(e), "channel");
  }
  const int interrupt_fd = ::dup(fd);
  if (interrupt_fd < 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::node_unreachable, std::string("dup: ") + std::strerror(e), "channel");
  }
  return std::unique_ptr<SessionChannel>(new SessionChannel(fd, interrupt_fd));
}

Result<std::unique_ptr<SessionChannel>> SessionChannel::attach(const std::string& socket_path,
                                                               const std::string& ticket,
                                                               std::chrono::milliseconds timeout) {
  Result<std::unique_ptr<SessionChannel>> channel = connect(socket_path);
  if (!channel.ok()) return channel.error();
  const std::span<const uint8_t> payload(reinterpret_cast<const uint8_t*>(ticket.data()), ticket.size());
  Result<std::vector<uint8_t>> reply = (*channel)->call(kAttachRoute, payload, timeout);
  if (!reply.ok()) return reply.error();
  // The node answers an accepted ticket with nothing, a refused one with its reason.
  if (!reply->empty())
    return make_error(ErrorCode::session_ended,
                      "the node refused the session channel: " + std::string(reply->begin(), reply->end()), "channel");
  return channel;
}

Result<SessionChannel::Opened> SessionChannel::open_session(const std::string& socket_path,
                                                            std::span<const uint8_t> hello,
                                                            std::chrono::milliseconds timeout) {
  Result<std::unique_ptr<SessionChannel>> channel = connect(socket_path);
  if (!channel.ok()) return channel.error();
  Result<std::vector<uint8_t>> reply = (*channel)->call(kHelloRoute, hello, timeout);
  if (!reply.ok()) return reply.error();
  return Opened{std::move(channel).value(), std::move(reply).value()};
}

SessionChannel::~SessionChannel() {
  if (fd_ >= 0) ::close(fd_);
  if (interrupt_fd_ >= 0) ::close(interrupt_fd_);
}

void SessionChannel::interrupt() {
  if (interrupt_fd_ >= 0) ::shutdown(interrupt_fd_, SHUT_RDWR);
}

Error SessionChannel::fail(Break cause, ErrorCode code, const std::string& reason) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  break_ = cause;
  return make_error(code, reason, "channel");
}

int SessionChannel::apply_timeout(std::chrono::milliseconds timeout) {
  if (timeout == timeout_) return 0;
  const auto ms = std::max<int64_t>(1, timeout.count());
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) return errno;
  timeout_ = timeout;
  return 0;
}

int SessionChannel::fill_inbox(size_t n, Clock::time_point deadline, std::vector<UniqueFd>* descriptors) {
  if (inbox_.size() < n) inbox_.resize(std::max<size_t>(n, 64 * 1024));
  alignas(cmsghdr) std::byte control[kDescriptorControlBytes];
  while (inbox_len_ < n) {
    ssize_t r = 0;
    if (descriptors == nullptr) {
      r = ::recv(fd_, inbox_.data() + inbox_len_, inbox_.size() - inbox_len_, 0);
    } else {
      iovec part{inbox_.data() + inbox_len_, inbox_.size() - inbox_len_};
      msghdr m{};
      m.msg_iov = &part;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      r = ::recvmsg(fd_, &m, MSG_CMSG_CLOEXEC);
      if (r >= 0) {
        for (int fd : scm_rights_fds(std::span<const std::byte>(control, m.msg_controllen)))
          descriptors->emplace_back(fd);
        // More descriptors than any reply carries: the kernel closed the
        // rest, so what arrived cannot be the node's answer.
        if ((m.msg_flags & MSG_CTRUNC) != 0) return EPROTO;
      }
    }
    if (r > 0) {
      inbox_len_ += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return ECONNRESET;
    if (errno == EINTR) {
      if (Clock::now() >= deadline) return ETIMEDOUT;
      continue;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;  // SO_RCVTIMEO expired
  }
  return 0;
}

Error SessionChannel::fail_io(int e, const std::string& reason) {
  if (e == ETIMEDOUT) return fail(Break::timeout, ErrorCode::rpc_timeout, reason);
  return fail(Break::closed, ErrorCode::rpc_failed, reason);
}

Result<std::vector<uint8_t>> SessionChannel::call(RouteId route, std::span<const uint8_t> payload,
                                                  std::chrono::milliseconds timeout,
                                                  std::vector<UniqueFd>* descriptors) {
  if (fd_ < 0)
    return make_error(ErrorCode::rpc_failed, "the session channel is broken by an earlier failure", "channel");
  if (payload.size() > kChannelMaxPayloadBytes)
    return make_error(ErrorCode::invalid_argument,
                      "a request of " + std::to_string(payload.size()) + " bytes exceeds the channel's frame limit",
                      "payload");
  if (const int e = apply_timeout(timeout); e != 0)
    return fail(Break::protocol, ErrorCode::rpc_failed,
                std::string("cannot set the channel's timeout: ") + std::strerror(e));
  const Clock::time_point deadline = Clock::now() + timeout;
  const ChannelFrameHeader request{static_cast<uint32_t>(payload.size()), route, next_sequence_++};
  if (const int e = write_channel_frame(fd_, request, payload, timeout); e != 0)
    return fail_io(e, std::string(route_name(route)) + ": cannot send: " + std::strerror(e));
  if (const int e = fill_inbox(kChannelHeaderBytes, deadline, descriptors); e != 0)
    return fail_io(
        e, std::string(route_name(route)) + (e == ETIMEDOUT ? ": no reply in time" : ": the node closed the channel"));
  Result<ChannelFrameHeader> reply = read_channel_header(std::span<const uint8_t>(inbox_.data(), kChannelHeaderBytes));
  if (!reply.ok())
    return fail(Break::protocol, ErrorCode::rpc_failed, "malformed reply header: " + reply.error().reason);
  if (reply->sequence != request.sequence || reply->route != request.route)
    return fail(Break::protocol, ErrorCode::rpc_failed,
                "reply " + std::to_string(reply->sequence) + " (" + std::string(route_name(reply->route)) +
                    ") answers no outstanding request (" + std::to_string(request.sequence) + ", " +
                    std::string(route_name(route)) + ")");
  const size_t frame = kChannelHeaderBytes + reply->payload_bytes;
  if (const int e = fill_inbox(frame, deadline, descriptors); e != 0)
    return fail_io(e, std::string(route_name(route)) + ": reply cut short: " + std::strerror(e));
  std::vector<uint8_t> out(inbox_.begin() + kChannelHeaderBytes, inbox_.begin() + static_cast<std::ptrdiff_t>(frame));
  // The node answers one frame per request, so nothing follows it yet; a
  // byte that did would be a protocol error, found by the next header check.
  std::memmove(inbox_.data(), inbox_.data() + frame, inbox_len_ - frame);
  inbox_len_ -= frame;
  return out;
}

}  // namespace kvrt
