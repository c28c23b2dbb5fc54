// The node's end of the session channel (framing and rationale:
// services/protocol/channel_frame.hpp). A CAF broker on the middleman's
// multiplexer thread: it accepts connections on the channel socket, binds
// each to a session through the gateway (attach frame + ticket), and turns
// every later frame into the session actor message the middleman would have
// delivered, answering with one frame per request, in request order.
//
// Who writes: the broker answers only the attach frame. After it, a
// per-connection writer actor (on the scheduler, not the multiplexer) takes
// each frame, asks the session actor, and writes the answer to the socket
// itself: an answer that went back through the broker would have to wake the
// multiplexer thread first (a pipe write and a context switch, about 15 us
// of a 40 us round trip here), while the scheduler thread that holds the
// answer is already running. The broker keeps reading, framing and closing.
//
// What the broker does not do: decide anything about the payload. It never
// decodes a receipt; the owners see exactly the bytes the worker sent, so the
// channel and the middleman cannot disagree about a message's meaning.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codec_node.hpp"
#include "services/node/session_channel.hpp"
#include "services/protocol/channel_frame.hpp"

namespace kvrt::actors {

namespace {

// Requests a worker may pipeline behind the one in flight before the node
// closes its channel (a blocking client has one at a time).
constexpr size_t kMaxQueuedFrames = 64;
// How long a writer waits for a worker to drain its socket before it gives
// the connection up (a large reply into a full socket buffer).
constexpr int kWriteStallMs = 5000;

using channel_frame_atom = caf::atom_constant<caf::atom("chframe")>;

wire_bytes error_payload(ErrorCode code, const std::string& reason) {
  return to_wire(codec::encode(codec::ErrorMessage{make_error(code, reason, "channel")}));
}

// The per-connection writer: requests in order, one at a time; each answer
// written to the connection's socket (a dup of the broker's descriptor).
struct ChannelWriterState {
  static inline const char* name = "channel-writer";
  session_actor session;
  int fd = -1;
  bool busy = false;
  std::deque<std::pair<ChannelFrameHeader, wire_bytes>> queued;
  ~ChannelWriterState() {
    if (fd >= 0) ::close(fd);
  }
};
using WriterSelf = caf::stateful_actor<ChannelWriterState>*;

void writer_next(WriterSelf self);

// A writer that cannot write shuts the socket down: the broker then sees the
// connection close and ends the writer with it.
void writer_answer(WriterSelf self, ChannelFrameHeader header, const wire_bytes& payload) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  if (write_channel_frame(self->state.fd, header, bytes, std::chrono::milliseconds(kWriteStallMs)) != 0)
    ::shutdown(self->state.fd, SHUT_RDWR);
  writer_next(self);
}

template <class Atom>
void writer_forward(WriterSelf self, Atom atom, ChannelFrameHeader header, wire_bytes bytes) {
  self->request(self->state.session, caf::infinite, atom, std::move(bytes))
      .then([self, header](wire_bytes& reply) { writer_answer(self, header, reply); },
            [self, header](caf::error& e) {
              writer_answer(self, header,
                            error_payload(ErrorCode::session_ended,
                                          "the session actor did not answer: " + caf::to_string(e)));
            });
}

void writer_dispatch(WriterSelf self, ChannelFrameHeader header, wire_bytes bytes) {
  self->state.busy = true;
  switch (header.route) {
    case ChannelRoute::attach:
      return writer_answer(self, header,
                           error_payload(ErrorCode::invalid_argument, "this channel is already attached to its session"));
    case ChannelRoute::allocator: return writer_forward(self, alloc_atom::value, header, std::move(bytes));
    case ChannelRoute::prefix: return writer_forward(self, prefix_atom::value, header, std::move(bytes));
    case ChannelRoute::authorize: return writer_forward(self, authorize_atom::value, header, std::move(bytes));
    case ChannelRoute::mapper: return writer_forward(self, mapper_atom::value, header, std::move(bytes));
    case ChannelRoute::executor: return writer_forward(self, exec_atom::value, header, std::move(bytes));
    case ChannelRoute::reuse: return writer_forward(self, reuse_atom::value, header, std::move(bytes));
    case ChannelRoute::ping: return writer_forward(self, ping_atom::value, header, std::move(bytes));
  }
}

void writer_next(WriterSelf self) {
  auto& st = self->state;
  st.busy = false;
  if (st.queued.empty()) return;
  auto [header, bytes] = std::move(st.queued.front());
  st.queued.pop_front();
  writer_dispatch(self, header, std::move(bytes));
}

caf::behavior channel_writer(WriterSelf self, session_actor session, int fd, caf::actor broker) {
  self->state.session = std::move(session);
  self->state.fd = fd;
  // A writer lives no longer than its broker (node shutdown) or its session
  // (whose end the broker also turns into a closed connection).
  self->monitor(broker);
  self->monitor(self->state.session);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  return {
      [self](channel_frame_atom, uint16_t route, uint64_t sequence, wire_bytes& bytes) {
        const ChannelFrameHeader header{0, static_cast<ChannelRoute>(route), sequence};
        auto& st = self->state;
        if (!st.busy) return writer_dispatch(self, header, std::move(bytes));
        if (st.queued.size() >= kMaxQueuedFrames) {
          ::shutdown(st.fd, SHUT_RDWR);  // more than a blocking client could have sent
          return;
        }
        st.queued.emplace_back(header, std::move(bytes));
      },
  };
}

struct ChannelConnection {
  caf::actor writer;      // invalid until attached
  caf::actor_addr session;
  uint64_t session_id = 0;
  bool attaching = false;
  // Bytes read but not yet a whole frame. The broker reads whatever the
  // socket has (one read for a header and its payload, where reading the
  // header and then exactly its payload took two), and cuts frames here.
  std::vector<char> inbox;
  size_t consumed = 0;  // bytes of inbox already cut into frames
};

// The most one read takes from a channel's socket. Small on purpose: CAF
// 0.17 value-initialises its read buffer back to this size before every
// read, so a large one costs a memset per frame; a frame above it simply
// takes several reads.
constexpr uint32_t kChannelReadBytes = 4096;

struct ChannelBrokerState {
  static inline const char* name = "channel";
  gateway_actor gateway;
  Observability obs;
  std::string socket_path;
  std::map<caf::io::connection_handle, ChannelConnection> connections;
};

using ChannelSelf = caf::stateful_actor<ChannelBrokerState, caf::io::broker>*;

void send_frame(ChannelSelf self, caf::io::connection_handle h, ChannelFrameHeader header, const wire_bytes& payload) {
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  const ChannelHeaderBytes bytes = write_channel_header(header);
  auto& buf = self->wr_buf(h);
  buf.insert(buf.end(), bytes.begin(), bytes.end());
  buf.insert(buf.end(), payload.begin(), payload.end());
  self->flush(h);
}

// Ends a connection the node will not serve any more (a malformed frame, a
// refused attach, its session gone), and its writer with it.
void drop(ChannelSelf self, caf::io::connection_handle h, const std::string& why) {
  auto& st = self->state;
  const auto it = st.connections.find(h);
  if (it == st.connections.end()) return;
  logger_or_default(st.obs.log).warn("actor=channel session={} closing the session channel: {}", it->second.session_id,
                                     why);
  if (it->second.writer) self->send_exit(it->second.writer, caf::exit_reason::user_shutdown);
  st.connections.erase(it);
  self->close(h);
}

// The descriptor of the broker's connection, for its writer. CAF 0.17's
// default multiplexer names a connection by its socket; the socket's own
// address (this channel's path) confirms that before anything is written.
int writer_descriptor(ChannelSelf self, caf::io::connection_handle h) {
  const int fd = static_cast<int>(h.id());
  sockaddr_un local{};
  socklen_t len = sizeof(local);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 || local.sun_family != AF_UNIX ||
      self->state.socket_path != local.sun_path)
    return -1;
  return ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

void attach(ChannelSelf self, caf::io::connection_handle h, ChannelFrameHeader header, wire_bytes ticket) {
  self->request(self->state.gateway, caf::infinite, attach_atom::value, std::string(ticket.begin(), ticket.end()))
      .then(
          [self, h, header](caf::actor& session, uint64_t session_id) {
            auto it = self->state.connections.find(h);
            if (it == self->state.connections.end()) return;
            // A refusal's reason travels as text: the worker has no session to decode it under.
            auto refuse = [&](const std::string& why) {
              send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
              drop(self, h, why);
            };
            if (!session) return refuse("unknown or ended session ticket");
            const int fd = writer_descriptor(self, h);
            if (fd < 0) return refuse("the node cannot identify this connection's socket");
            it->second.attaching = false;
            it->second.session = session.address();
            it->second.session_id = session_id;
            it->second.writer =
                self->spawn(channel_writer, caf::actor_cast<session_actor>(session), fd, caf::actor_cast<caf::actor>(self));
            // The session's end (its worker gone) ends its channels too.
            self->monitor(session);
            send_frame(self, h, header, {});
          },
          [self, h, header](caf::error& e) {
            const std::string why = "the gateway did not answer: " + caf::to_string(e);
            if (!self->state.connections.count(h)) return;
            send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
            drop(self, h, why);
          });
}

void on_frame(ChannelSelf self, caf::io::connection_handle h, ChannelConnection& c, ChannelFrameHeader header,
              wire_bytes bytes) {
  if (c.writer) {
    self->send(c.writer, channel_frame_atom::value, static_cast<uint16_t>(header.route), header.sequence,
               std::move(bytes));
    return;
  }
  if (header.route != ChannelRoute::attach || c.attaching) {
    const std::string why = c.attaching ? std::string("a frame before the attach frame was answered")
                                        : std::string("a ") + to_string(header.route) + " frame before the attach frame";
    send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
    return drop(self, h, why);
  }
  c.attaching = true;
  attach(self, h, header, std::move(bytes));
}

caf::behavior channel_broker(ChannelSelf self, gateway_actor gateway, Observability obs, int listen_fd,
                             std::string socket_path) {
  self->state.gateway = std::move(gateway);
  self->state.obs = std::move(obs);
  self->state.socket_path = std::move(socket_path);
  self->add_doorman(listen_fd);
  self->set_down_handler([self](caf::down_msg& dm) {
    std::vector<caf::io::connection_handle> ended;
    for (auto& [h, c] : self->state.connections)
      if (c.session && c.session == dm.source) ended.push_back(h);
    for (auto h : ended) drop(self, h, "its session ended");
  });
  return {
      [self](const caf::io::new_connection_msg& m) {
        self->state.connections.emplace(m.handle, ChannelConnection{});
        self->configure_read(m.handle, caf::io::receive_policy::at_most(kChannelReadBytes));
      },
      [self](caf::io::new_data_msg& m) {
        auto it = self->state.connections.find(m.handle);
        if (it == self->state.connections.end()) return;
        ChannelConnection& c = it->second;
        c.inbox.insert(c.inbox.end(), m.buf.begin(), m.buf.end());
        const caf::io::connection_handle h = m.handle;
        while (c.inbox.size() - c.consumed >= kChannelHeaderBytes) {
          const auto* at = reinterpret_cast<const uint8_t*>(c.inbox.data() + c.consumed);
          Result<ChannelFrameHeader> header = read_channel_header(std::span<const uint8_t>(at, kChannelHeaderBytes));
          if (!header.ok()) return drop(self, h, header.error().describe());
          const size_t frame = kChannelHeaderBytes + header->payload_bytes;
          if (c.inbox.size() - c.consumed < frame) break;
          const auto payload = c.inbox.begin() + static_cast<std::ptrdiff_t>(c.consumed + kChannelHeaderBytes);
          wire_bytes bytes(payload, payload + header->payload_bytes);
          c.consumed += frame;
          on_frame(self, h, c, *header, std::move(bytes));
          // on_frame may have dropped the connection (and with it `c`).
          it = self->state.connections.find(h);
          if (it == self->state.connections.end()) return;
        }
        ChannelConnection& rest = it->second;
        if (rest.consumed == rest.inbox.size()) {
          rest.inbox.clear();
          rest.consumed = 0;
        } else if (rest.consumed > 0) {
          rest.inbox.erase(rest.inbox.begin(), rest.inbox.begin() + static_cast<std::ptrdiff_t>(rest.consumed));
          rest.consumed = 0;
        }
      },
      [self](const caf::io::connection_closed_msg& m) {
        auto it = self->state.connections.find(m.handle);
        if (it == self->state.connections.end()) return;
        if (it->second.writer) self->send_exit(it->second.writer, caf::exit_reason::user_shutdown);
        self->state.connections.erase(it);
      },
      [](const caf::io::acceptor_closed_msg&) {},
  };
}

}  // namespace

Result<caf::actor> spawn_channel_broker(caf::actor_system& system, gateway_actor gateway, const std::string& socket_path,
                                        Observability obs) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path))
    return make_error(ErrorCode::invalid_argument, "channel socket path of " + std::to_string(socket_path.size()) +
                                                       " bytes does not fit a socket address: " + socket_path,
                      "channel_socket");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(ErrorCode::io, std::string("channel socket: ") + std::strerror(errno), "channel_socket");
  ::unlink(socket_path.c_str());  // a stale socket of an earlier node
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::io, "cannot listen on " + socket_path + ": " + std::strerror(e), "channel_socket");
  }
  ::chmod(socket_path.c_str(), 0600);  // the token directory (0700) already keeps other users out
  return system.middleman().spawn_broker(channel_broker, std::move(gateway), std::move(obs), fd, socket_path);
}

}  // namespace kvrt::actors
