#pragma once
// The node's end of the session channel (framing and rationale:
// services/session/channel_frame.hpp). Include only from actors/*.cpp.
//
// One thread per connection reads the socket with a blocking recv and cuts
// frames; the first binds the connection to its session through the gateway
// (attach + ticket). Every later frame goes to the connection's writer actor,
// which asks the session actor and writes the answer to the socket itself,
// one answer per request, in order.
//
// Why threads and not a CAF broker: a broker runs on the middleman's
// multiplexer thread, so each frame paid for the multiplexer's wake-up and
// its read and dispatch machinery: 37 us for an echo against a 21 us raw
// Unix ping-pong here. A blocked recv is woken by the kernel exactly as the
// raw ping-pong's is, and hands the frame to the scheduler (a polling node
// takes it without any wake-up). Connections are few (one per worker
// process), so a thread each is cheap.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "actors/owner_actors.hpp"
#include "services/common/unique_fd.hpp"

namespace kvrt::actors {

// The descriptors of the node's unnamed pool segments by pool id (dups,
// owned here): what a connection's writer attaches, as SCM_RIGHTS, to the
// pool_descriptors answer, for exactly the pools the authorization owner's
// receipt names. Empty: the node's segments have names.
using PoolDescriptorTable = std::map<uint32_t, UniqueFd>;

// How the server tells a silent client of a session opened on the channel
// (kHelloRoute) from a live one: every frame on any of the session's
// connections counts as life, and one silent for `timeout_ms` (a stopped
// or hung process; a live client pings) loses its lifeline, which ends the
// session as a worker lost. Checked every `check_ms`.
struct ChannelLiveness {
  uint32_t check_ms = 250;
  uint32_t timeout_ms = 2000;
};

class ChannelServer {
 public:
  // Listens on a new AF_UNIX stream socket at `socket_path` (a stale one is
  // replaced). The server must be destroyed before the actor system.
  static Result<std::unique_ptr<ChannelServer>> start(caf::actor_system& system, gateway_actor gateway,
                                                      std::string socket_path, Observability obs,
                                                      std::shared_ptr<const PoolDescriptorTable> pool_descriptors,
                                                      ChannelLiveness liveness = {});
  // Stops accepting, shuts every connection down, and waits for their
  // threads; their writers end with them.
  ~ChannelServer();
  ChannelServer(const ChannelServer&) = delete;
  ChannelServer& operator=(const ChannelServer&) = delete;

 private:
  ChannelServer(caf::actor_system& system, gateway_actor gateway, std::string socket_path, Observability obs,
                std::shared_ptr<const PoolDescriptorTable> pool_descriptors, ChannelLiveness liveness, int listen_fd);
  void accept_loop();
  void serve(int fd);     // one connection, on its own thread
  void watch_liveness();  // the silent sessions' lifelines shut down, on its own thread

  // A session opened on the channel: when any of its connections last
  // carried a frame, and the connection that opened it.
  struct SessionLife {
    std::atomic<int64_t> last_frame_ms{0};
    int lifeline_fd = -1;
    std::atomic<bool> silenced{false};  // the watch shut the lifeline down
  };

  caf::actor_system& system_;
  gateway_actor gateway_;
  std::string socket_path_;
  Observability obs_;
  std::shared_ptr<const PoolDescriptorTable> pool_descriptors_;
  ChannelLiveness liveness_;
  int listen_fd_ = -1;
  std::mutex mutex_;
  std::condition_variable all_done_;
  std::set<int> open_;                                      // connections being served (shut down at destruction)
  std::map<uint64_t, std::shared_ptr<SessionLife>> lives_;  // sessions opened on the channel, by id
  size_t threads_ = 0;                                      // accept loop + connection threads still running
  bool stopping_ = false;
};

}  // namespace kvrt::actors
