// The node's end of the session channel (framing and rationale:
// services/protocol/channel_frame.hpp). A CAF broker on the middleman's
// multiplexer thread: it accepts connections on the channel socket, binds
// each to a session through the gateway (attach frame + ticket), and turns
// every later frame into the session actor message the middleman would have
// delivered, answering with one frame per request, in request order.
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
#include "services/protocol/channel_frame.hpp"

namespace kvrt::actors {

namespace {

// Requests a worker may pipeline behind the one in flight before the node
// closes its channel (a blocking client has one at a time).
constexpr size_t kMaxQueuedFrames = 64;

struct ChannelConnection {
  session_actor session;  // invalid until attached
  uint64_t session_id = 0;
  bool awaiting_payload = false;
  ChannelFrameHeader header;  // of the frame whose payload is awaited
  bool busy = false;          // a request is with the session actor (or the gateway)
  std::deque<std::pair<ChannelFrameHeader, wire_bytes>> queued;
};

struct ChannelBrokerState {
  static inline const char* name = "channel";
  gateway_actor gateway;
  Observability obs;
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

wire_bytes error_payload(ErrorCode code, const std::string& reason) {
  return to_wire(codec::encode(codec::ErrorMessage{make_error(code, reason, "channel")}));
}

// Ends a connection the node will not serve any more (a malformed frame, a
// refused attach, its session gone): what is queued is dropped with it.
void drop(ChannelSelf self, caf::io::connection_handle h, const std::string& why) {
  auto& st = self->state;
  const auto it = st.connections.find(h);
  if (it == st.connections.end()) return;
  logger_or_default(st.obs.log).warn("actor=channel session={} closing the session channel: {}", it->second.session_id,
                                     why);
  st.connections.erase(it);
  self->close(h);
}

void dispatch_next(ChannelSelf self, caf::io::connection_handle h);

// One request to the session actor; its reply (or the transport's error,
// encoded as an ErrorMessage like every owner's refusal) becomes one frame.
template <class Atom>
void forward(ChannelSelf self, caf::io::connection_handle h, ChannelConnection& c, Atom atom,
             ChannelFrameHeader header, wire_bytes bytes) {
  self->request(c.session, caf::infinite, atom, std::move(bytes))
      .then(
          [self, h, header](wire_bytes& reply) {
            if (!self->state.connections.count(h)) return;  // closed meanwhile
            send_frame(self, h, header, reply);
            dispatch_next(self, h);
          },
          [self, h, header](caf::error& e) {
            if (!self->state.connections.count(h)) return;
            send_frame(self, h, header,
                       error_payload(ErrorCode::session_ended, "the session actor did not answer: " + caf::to_string(e)));
            dispatch_next(self, h);
          });
}

void attach(ChannelSelf self, caf::io::connection_handle h, ChannelFrameHeader header, wire_bytes ticket) {
  self->request(self->state.gateway, caf::infinite, attach_atom::value, std::string(ticket.begin(), ticket.end()))
      .then(
          [self, h, header](caf::actor& session, uint64_t session_id) {
            auto it = self->state.connections.find(h);
            if (it == self->state.connections.end()) return;
            if (!session) {
              // The refusal's reason travels as text: the worker has no session to decode it under.
              const std::string why = "unknown or ended session ticket";
              send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
              drop(self, h, why);
              return;
            }
            it->second.session = caf::actor_cast<session_actor>(session);
            it->second.session_id = session_id;
            // The session's end (its worker gone) ends its channels too.
            self->monitor(session);
            send_frame(self, h, header, {});
            dispatch_next(self, h);
          },
          [self, h, header](caf::error& e) {
            const std::string why = "the gateway did not answer: " + caf::to_string(e);
            if (!self->state.connections.count(h)) return;
            send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
            drop(self, h, why);
          });
}

void dispatch(ChannelSelf self, caf::io::connection_handle h, ChannelConnection& c, ChannelFrameHeader header,
              wire_bytes bytes) {
  c.busy = true;
  if (!c.session) {
    if (header.route == ChannelRoute::attach) return attach(self, h, header, std::move(bytes));
    const std::string why = std::string("a ") + to_string(header.route) + " frame before the attach frame";
    send_frame(self, h, header, wire_bytes(why.begin(), why.end()));
    return drop(self, h, why);
  }
  switch (header.route) {
    case ChannelRoute::attach:
      send_frame(self, h, header,
                 error_payload(ErrorCode::invalid_argument, "this channel is already attached to its session"));
      return dispatch_next(self, h);
    case ChannelRoute::allocator: return forward(self, h, c, alloc_atom::value, header, std::move(bytes));
    case ChannelRoute::prefix: return forward(self, h, c, prefix_atom::value, header, std::move(bytes));
    case ChannelRoute::authorize: return forward(self, h, c, authorize_atom::value, header, std::move(bytes));
    case ChannelRoute::mapper: return forward(self, h, c, mapper_atom::value, header, std::move(bytes));
    case ChannelRoute::executor: return forward(self, h, c, exec_atom::value, header, std::move(bytes));
    case ChannelRoute::reuse: return forward(self, h, c, reuse_atom::value, header, std::move(bytes));
    case ChannelRoute::ping: return forward(self, h, c, ping_atom::value, header, std::move(bytes));
  }
}

void dispatch_next(ChannelSelf self, caf::io::connection_handle h) {
  auto it = self->state.connections.find(h);
  if (it == self->state.connections.end()) return;
  ChannelConnection& c = it->second;
  c.busy = false;
  if (c.queued.empty()) return;
  auto [header, bytes] = std::move(c.queued.front());
  c.queued.pop_front();
  dispatch(self, h, c, header, std::move(bytes));
}

void on_frame(ChannelSelf self, caf::io::connection_handle h, ChannelConnection& c, ChannelFrameHeader header,
              wire_bytes bytes) {
  if (!c.busy) return dispatch(self, h, c, header, std::move(bytes));
  if (c.queued.size() >= kMaxQueuedFrames)
    return drop(self, h, "more than " + std::to_string(kMaxQueuedFrames) + " requests queued behind one in flight");
  c.queued.emplace_back(header, std::move(bytes));
}

caf::behavior channel_broker(ChannelSelf self, gateway_actor gateway, Observability obs, int listen_fd) {
  self->state.gateway = std::move(gateway);
  self->state.obs = std::move(obs);
  self->add_doorman(listen_fd);
  self->set_down_handler([self](caf::down_msg& dm) {
    std::vector<caf::io::connection_handle> ended;
    for (auto& [h, c] : self->state.connections)
      if (c.session && c.session.address() == dm.source) ended.push_back(h);
    for (auto h : ended) drop(self, h, "its session ended");
  });
  return {
      [self](const caf::io::new_connection_msg& m) {
        self->state.connections.emplace(m.handle, ChannelConnection{});
        self->configure_read(m.handle, caf::io::receive_policy::exactly(kChannelHeaderBytes));
      },
      [self](caf::io::new_data_msg& m) {
        auto it = self->state.connections.find(m.handle);
        if (it == self->state.connections.end()) return;
        ChannelConnection& c = it->second;
        if (c.awaiting_payload) {
          c.awaiting_payload = false;
          self->configure_read(m.handle, caf::io::receive_policy::exactly(kChannelHeaderBytes));
          return on_frame(self, m.handle, c, c.header, std::move(m.buf));
        }
        Result<ChannelFrameHeader> header = read_channel_header(as_span(m.buf));
        if (!header.ok()) return drop(self, m.handle, header.error().describe());
        if (header->payload_bytes == 0) return on_frame(self, m.handle, c, *header, {});
        c.header = *header;
        c.awaiting_payload = true;
        self->configure_read(m.handle, caf::io::receive_policy::exactly(header->payload_bytes));
      },
      [self](const caf::io::connection_closed_msg& m) { self->state.connections.erase(m.handle); },
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
  return system.middleman().spawn_broker(channel_broker, std::move(gateway), std::move(obs), fd);
}

}  // namespace kvrt::actors
