#pragma once
// SessionChannel: the worker's end of the session channel (framing and
// rationale in services/session/channel_frame.hpp). A blocking stream socket
// that the calling thread writes and reads itself: one writev per request,
// no other thread involved, which is what makes it cheaper than the
// middleman's round trip.
//
// Not thread-safe: one caller at a time (kvrt::Client serialises its calls).
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "services/common/unique_fd.hpp"
#include "services/session/channel_frame.hpp"

namespace kvrt {

// Writes one frame, header and payload, to a stream socket with as few
// system calls as the socket allows (one, unless its buffer fills); a full
// buffer waits up to `stall` for room. 0, or the errno (ETIMEDOUT when the
// socket stayed full). Both ends of the channel write with it.
// `descriptors` (at most kMaxDescriptorsPerMessage) travel as SCM_RIGHTS
// with the frame's first byte: the node's answer to pool_descriptors.
int write_channel_frame(int fd, ChannelFrameHeader header, std::span<const uint8_t> payload,
                        std::chrono::milliseconds stall, std::span<const int> descriptors = {});

class SessionChannel {
 public:
  // Connects to the node's channel socket and attaches this connection to the
  // session the ticket names. node_unreachable when the socket cannot be
  // reached; session_ended when the node refuses the ticket (its reason).
  static Result<std::unique_ptr<SessionChannel>> attach(const std::string& socket_path, const std::string& ticket,
                                                        std::chrono::milliseconds timeout);
  // Connects and opens a session on this connection (kHelloRoute): the
  // node answers the HelloRequest bytes with a SessionReceipt or an
  // ErrorMessage (the caller decodes `reply`). The connection is then the
  // session's lifeline: closing it ends the session. node_unreachable when
  // the socket cannot be reached; transport errors as call().
  struct Opened {
    std::unique_ptr<SessionChannel> channel;
    std::vector<uint8_t> reply;
  };
  static Result<Opened> open_session(const std::string& socket_path, std::span<const uint8_t> hello,
                                     std::chrono::milliseconds timeout);
  ~SessionChannel();
  SessionChannel(const SessionChannel&) = delete;
  SessionChannel& operator=(const SessionChannel&) = delete;

  // Sends one request frame and returns the reply frame's payload.
  // rpc_timeout when no whole reply came within `timeout`; rpc_failed when
  // the node closed the connection or answered out of order. After either
  // the channel is broken(): the stream may still hold a late reply, so it
  // is never read again.
  // `descriptors`: the call also takes the descriptors the reply carries
  // (SCM_RIGHTS), appended there, owned; without it any that arrive are
  // closed by the kernel.
  Result<std::vector<uint8_t>> call(RouteId route, std::span<const uint8_t> payload, std::chrono::milliseconds timeout,
                                    std::vector<UniqueFd>* descriptors = nullptr);
  bool broken() const { return fd_ < 0; }

  // Why the channel broke: the caller tells a dead node (closed: the kernel
  // closes a killed process's sockets at once) from a slow one (timeout).
  enum class Break : uint8_t { none, timeout, closed, protocol };
  Break break_cause() const { return break_; }

  // Wakes a call blocked in this channel from another thread (it then fails
  // as closed) and makes every later call fail the same way: the client's
  // watch of the node's liveness uses it. Safe at any time while the object
  // lives: it shuts the socket down through a descriptor of its own, which
  // the calling thread never closes.
  void interrupt();

 private:
  SessionChannel(int fd, int interrupt_fd) : fd_(fd), interrupt_fd_(interrupt_fd) {}
  static Result<std::unique_ptr<SessionChannel>> connect(const std::string& socket_path);
  Error fail(Break cause, ErrorCode code, const std::string& reason);
  // A failed read or write: ETIMEDOUT is a timeout, any other errno (reset,
  // broken pipe, end of stream) a closed connection.
  Error fail_io(int e, const std::string& reason);
  // The socket's receive timeout follows the caller's (set only when it
  // changes: a system call).
  int apply_timeout(std::chrono::milliseconds timeout);
  // Reads until the inbox holds `n` bytes (at most `n` more arrive per call
  // beyond what the inbox can take). 0, or the errno.
  int fill_inbox(size_t n, std::chrono::steady_clock::time_point deadline, std::vector<UniqueFd>* descriptors);

  int fd_ = -1;
  int interrupt_fd_ = -1;  // dup of fd_ for interrupt(); closed only by the destructor
  Break break_ = Break::none;
  uint64_t next_sequence_ = 1;
  std::chrono::milliseconds timeout_{-1};
  // Bytes read but not consumed: a small reply arrives with its header in
  // one read (one system call per reply, which on these VMs is most of a
  // round trip's cost beyond the two wake-ups).
  std::vector<uint8_t> inbox_;
  size_t inbox_len_ = 0;
};

}  // namespace kvrt
