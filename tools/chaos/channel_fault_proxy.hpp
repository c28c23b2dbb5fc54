#pragma once
// ChannelFaultProxy: transport faults on honest traffic. A Unix-socket proxy
// between workers and the node's session channel (services/session/
// channel_frame.hpp) that forwards whole frames both ways and, for a worker
// process it was armed for, does one thing wrong to one frame after the
// attach:
//
//   delay           holds the next frame delay_ms, then forwards it
//   duplicate       forwards the next request twice (the node runs it twice)
//   drop_request    never forwards the next request (no reply comes)
//   drop_reply      forwards the request, never its reply (the node ran it)
//   truncate        forwards the next frame's header and half its payload,
//                   then closes both sides: a connection cut mid-frame
//   close           closes both sides before the next frame
//
// What an honest worker must make of each: a delay below its call timeout
// changes nothing; a longer one, a drop or a duplicate breaks the channel
// with a typed error (rpc_timeout; rpc_failed, a reply out of order) and the
// session goes on over the middleman; a cut connection ends the session
// (session_ended: a live node's channel closed). The node must run everything it received exactly once per
// frame and reclaim whatever the session held when it ends; a node that
// crashes or hangs on a cut frame, or a worker that hangs or reports
// success after losing a reply, is the bug.
//
// The channel carries one request at a time per connection (a blocking
// caller), so the order of frames within one connection cannot change;
// reordering across connections is what separate sessions already do.
//
// Workers reach the proxy with `kvrt worker --channel-socket PATH`; the
// proxy tells their connections apart by the peer's pid (SO_PEERCRED) and
// connects each to `target` (the node's channel socket, the same path
// across node restarts).
#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "services/common/result.hpp"

namespace kvrt::chaos {

enum class TransportFaultKind : uint8_t { delay, duplicate, drop_request, drop_reply, truncate, close };
inline constexpr size_t kTransportFaultKindCount = 6;
std::string_view to_string(TransportFaultKind kind);

struct TransportFault {
  TransportFaultKind kind = TransportFaultKind::delay;
  uint32_t delay_ms = 0;  // delay only
};

struct ChannelProxyStats {
  uint64_t connections = 0;
  uint64_t frames_forwarded = 0;
  std::array<uint64_t, kTransportFaultKindCount> applied{};  // faults done, by kind
  uint64_t refused_targets = 0;                              // connections the node's socket refused
};

class ChannelFaultProxy {
 public:
  // Listens on `listen_path` (replaced if a stale socket is there).
  static Result<std::unique_ptr<ChannelFaultProxy>> start(const std::string& listen_path, std::string target);
  ~ChannelFaultProxy();  // stops every relay and removes the socket
  ChannelFaultProxy(const ChannelFaultProxy&) = delete;
  ChannelFaultProxy& operator=(const ChannelFaultProxy&) = delete;

  // The next frame after the attach of the connection from process `pid`
  // (now or once it connects) gets `fault`; one per process.
  void arm(int pid, TransportFault fault);
  // Forgets what is armed for a process that is gone.
  void disarm(int pid);
  ChannelProxyStats stats() const;
  const std::string& path() const { return listen_path_; }

 private:
  ChannelFaultProxy(int listen_fd, int wake_fd, std::string listen_path, std::string target);
  void accept_loop();
  void relay(int client_fd, int pid);
  void reap_relays(bool all);
  // The fault armed for `pid`, taken (at most once).
  std::optional<TransportFault> take(int pid);

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: written once to stop every loop
  std::string listen_path_, target_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::map<int, TransportFault> armed_;  // by worker pid
  ChannelProxyStats stats_;
  struct Relay {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Relay> relays_;  // the acceptor's only; finished ones are joined as it goes
  std::thread acceptor_;
};

}  // namespace kvrt::chaos
