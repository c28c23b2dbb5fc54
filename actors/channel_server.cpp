#include "actors/channel_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "actors/owner_routes.hpp"
#include "schema/codecs.hpp"
#include "services/common/scm_rights.hpp"
#include "services/common/unix_socket_address.hpp"
#include "services/session/channel_frame.hpp"
#include "services/session/session_channel.hpp"

namespace kvrt::actors {

namespace {

// Requests a worker may pipeline behind the one in flight before the node
// closes its channel (a blocking client has one at a time).
constexpr size_t kMaxQueuedFrames = 64;
// How long a writer waits for a worker to drain its socket before it gives
// the connection up. A blocking client has one reply in flight, which the
// socket buffer (about 200 KiB) takes whole, so only a worker that sends
// requests without reading their answers ever waits here; the wait holds a
// scheduler thread, so it is short.
constexpr int kWriteStallMs = 1000;

using channel_frame_atom = caf::atom_constant<caf::atom("chframe")>;

wire_bytes error_payload(ErrorCode code, const std::string& reason) {
  return error_reply(make_error(code, reason, "channel"));
}

// The per-connection writer: requests in order, one at a time; each answer
// written to the connection's socket (a dup of its reader's descriptor).
struct ChannelWriterState {
  static inline const char* name = "channel-writer";
  session_actor session;
  std::shared_ptr<const PoolDescriptorTable> pool_descriptors;
  int fd = -1;
  bool busy = false;
  std::deque<std::pair<ChannelFrameHeader, wire_bytes>> queued;
  ~ChannelWriterState() {
    if (fd >= 0) ::close(fd);
  }
};
using WriterSelf = caf::stateful_actor<ChannelWriterState>*;

void writer_next(WriterSelf self);

// A writer that cannot write shuts the socket down: the reader then sees the
// connection close and ends the writer with it.
void writer_answer(WriterSelf self, ChannelFrameHeader header, const wire_bytes& payload,
                   std::span<const int> descriptors = {}) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  if (write_channel_frame(self->state.fd, header, bytes, std::chrono::milliseconds(kWriteStallMs), descriptors) != 0)
    ::shutdown(self->state.fd, SHUT_RDWR);
  writer_next(self);
}

// The authorization owner decided which pools the session may map; the
// writer sends their descriptors with its receipt. A refusal goes as it is.
void writer_answer_pool_descriptors(WriterSelf self, ChannelFrameHeader header, const wire_bytes& reply) {
  Result<PoolDescriptorReceipt> receipt = codec::decode<PoolDescriptorReceipt>(as_span(reply));
  if (!receipt.ok()) return writer_answer(self, header, reply);
  std::vector<int> descriptors;
  for (const PoolAttachment& p : receipt->pools) {
    const auto it = self->state.pool_descriptors->find(p.pool.value);
    if (it == self->state.pool_descriptors->end())
      return writer_answer(self, header,
                           error_payload(ErrorCode::invalid_argument,
                                         "pool " + std::to_string(p.pool.value) + " has no descriptor to send"));
    descriptors.push_back(it->second.get());
  }
  if (descriptors.size() > kMaxDescriptorsPerMessage)
    return writer_answer(
        self, header,
        error_payload(ErrorCode::invalid_argument, std::to_string(descriptors.size()) + " pools exceed one message's " +
                                                       std::to_string(kMaxDescriptorsPerMessage) + " descriptors"));
  writer_answer(self, header, reply, descriptors);
}

void writer_dispatch(WriterSelf self, ChannelFrameHeader header, wire_bytes bytes) {
  self->state.busy = true;
  if (header.route == kAttachRoute)
    return writer_answer(self, header,
                         error_payload(ErrorCode::invalid_argument, "this channel is already attached to its session"));
  // Every other route is the session actor's to answer (routes.hpp).
  self->request(self->state.session, caf::infinite, route_atom::value, header.route.value, std::move(bytes))
      .then(
          [self, header](wire_bytes& reply) {
            if (header.route == PoolDescriptorsRoute::id) return writer_answer_pool_descriptors(self, header, reply);
            writer_answer(self, header, reply);
          },
          [self, header](caf::error& e) {
            writer_answer(
                self, header,
                error_payload(ErrorCode::session_ended, "the session actor did not answer: " + caf::to_string(e)));
          });
}

void writer_next(WriterSelf self) {
  auto& st = self->state;
  st.busy = false;
  if (st.queued.empty()) return;
  auto [header, bytes] = std::move(st.queued.front());
  st.queued.pop_front();
  writer_dispatch(self, header, std::move(bytes));
}

caf::behavior channel_writer(WriterSelf self, session_actor session,
                             std::shared_ptr<const PoolDescriptorTable> pool_descriptors, int fd) {
  self->state.session = std::move(session);
  self->state.pool_descriptors = std::move(pool_descriptors);
  self->state.fd = fd;
  // The session's end (its worker gone) ends the connection: the reader's
  // recv returns, and it ends this writer.
  self->monitor(self->state.session);
  self->set_down_handler([self](caf::down_msg&) {
    ::shutdown(self->state.fd, SHUT_RDWR);
    self->quit();
  });
  return {
      [self](channel_frame_atom, uint16_t route, uint64_t sequence, wire_bytes& bytes) {
        const ChannelFrameHeader header{0, RouteId{route}, sequence};
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

// Connections served at once (a thread each). A worker process holds one;
// connections beyond this are closed as they arrive, so no client can make
// the node start threads without bound.
constexpr size_t kMaxConnections = 256;

// How long a connection's thread waits for the gateway to resolve a ticket.
constexpr auto kAttachTimeout = std::chrono::seconds(10);

// Writes one frame from a connection's thread (the attach answer and
// refusals, before a writer exists): false when the socket would not take it.
bool send_text_frame(int fd, ChannelFrameHeader header, const std::string& text) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  return write_channel_frame(fd, header, bytes, std::chrono::milliseconds(kWriteStallMs)) == 0;
}

}  // namespace

Result<std::unique_ptr<ChannelServer>> ChannelServer::start(caf::actor_system& system, gateway_actor gateway,
                                                            std::string socket_path, Observability obs,
                                                            std::shared_ptr<const PoolDescriptorTable> pool_descriptors,
                                                            ChannelLiveness liveness) {
  Result<sockaddr_un> address = unix_socket_address(socket_path, "channel_socket");
  if (!address.ok()) return address.error();
  const sockaddr_un addr = *address;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_error(ErrorCode::io, std::string("channel socket: ") + std::strerror(errno), "channel_socket");
  ::unlink(socket_path.c_str());  // a stale socket of an earlier node
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::io, "cannot listen on " + socket_path + ": " + std::strerror(e), "channel_socket");
  }
  ::chmod(socket_path.c_str(), 0600);  // the token directory (0700) already keeps other users out
  std::unique_ptr<ChannelServer> server(new ChannelServer(
      system, std::move(gateway), std::move(socket_path), std::move(obs),
      pool_descriptors ? std::move(pool_descriptors) : std::make_shared<const PoolDescriptorTable>(), liveness, fd));
  server->threads_ = 2;
  std::thread([s = server.get()] { s->accept_loop(); }).detach();
  std::thread([s = server.get()] { s->watch_liveness(); }).detach();
  return server;
}

ChannelServer::ChannelServer(caf::actor_system& system, gateway_actor gateway, std::string socket_path,
                             Observability obs, std::shared_ptr<const PoolDescriptorTable> pool_descriptors,
                             ChannelLiveness liveness, int listen_fd)
    : system_(system),
      gateway_(std::move(gateway)),
      socket_path_(std::move(socket_path)),
      obs_(std::move(obs)),
      pool_descriptors_(std::move(pool_descriptors)),
      liveness_(liveness),
      listen_fd_(listen_fd) {}

ChannelServer::~ChannelServer() {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);               // wakes the blocked accept
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);  // wakes every blocked recv
  all_done_.notify_all();                          // wakes the liveness watch
  all_done_.wait(lock, [this] { return threads_ == 0; });
  ::close(listen_fd_);
  ::unlink(socket_path_.c_str());
}

void ChannelServer::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      break;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
      logger_or_default(obs_.log).error("actor=channel accept failed: {}; no new channels", std::strerror(errno));
      break;
    }
    if (open_.size() >= kMaxConnections) {
      logger_or_default(obs_.log).warn("actor=channel refusing a session channel: {} connections are open already",
                                       open_.size());
      ::close(fd);
      continue;
    }
    open_.insert(fd);
    ++threads_;
    std::thread([this, fd] { serve(fd); }).detach();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  --threads_;
  all_done_.notify_all();
}

static int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ChannelServer::watch_liveness() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    all_done_.wait_for(lock, std::chrono::milliseconds(liveness_.check_ms));
    if (stopping_) break;
    const int64_t now = steady_ms();
    for (auto& [session, life] : lives_)
      if (!life->silenced.load() && now - life->last_frame_ms.load() > liveness_.timeout_ms) {
        // The lifeline's reader wakes with the end of the stream and ends
        // the session as lost (serve, below).
        life->silenced.store(true);
        ::shutdown(life->lifeline_fd, SHUT_RDWR);
      }
  }
  --threads_;
  all_done_.notify_all();
}

void ChannelServer::serve(int fd) {
  caf::actor writer;
  uint64_t session_id = 0;
  std::shared_ptr<SessionLife> life;  // the session's, when it was opened on the channel
  bool lifeline = false;              // this connection opened it
  ChannelFrameReader frames;
  std::string why;  // why the node ended the connection; empty: the worker closed it
  std::vector<uint8_t> buf(64 * 1024);
  for (bool open = true; open;) {
    const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (life) life->last_frame_ms.store(steady_ms());
    frames.append(std::span<const uint8_t>(buf.data(), static_cast<size_t>(r)));
    while (open) {
      Result<std::optional<ChannelFrameReader::Frame>> frame = frames.next();
      if (!frame.ok()) {
        why = frame.error().describe();
        open = false;
        break;
      }
      if (!frame->has_value()) break;
      const ChannelFrameHeader header = (*frame)->header;
      wire_bytes bytes((*frame)->payload.begin(), (*frame)->payload.end());
      if (writer) {
        caf::anon_send(writer, channel_frame_atom::value, header.route.value, header.sequence, std::move(bytes));
        continue;
      }
      // The first frame binds the connection: to a session opened through
      // the middleman (attach, a ticket) or to one it opens itself (hello).
      // An attach refusal's reason travels as text (the worker has no
      // session to decode it under); a hello's answer is the receipt or an
      // ErrorMessage.
      if (header.route != kAttachRoute && header.route != kHelloRoute) {
        why = std::string("a ") + std::string(route_name(header.route)) + " frame before the attach or hello frame";
        (void)send_text_frame(fd, header, why);
        open = false;
        break;
      }
      caf::actor session;
      std::string answer;  // what the first frame is answered with
      {
        caf::scoped_actor self{system_};
        if (header.route == kAttachRoute) {
          self->request(gateway_, kAttachTimeout, attach_atom::value, std::string(bytes.begin(), bytes.end()))
              .receive([&](caf::actor& s, uint64_t id) { session = std::move(s), session_id = id; },
                       [&](caf::error& e) { why = "the gateway did not answer: " + caf::to_string(e); });
          if (!session && why.empty()) why = "unknown or ended session ticket";
          if (!why.empty()) answer = why;
        } else {
          self->request(gateway_, kAttachTimeout, channel_hello_atom::value, std::move(bytes))
              .receive(
                  [&](wire_bytes& reply, caf::actor& s, uint64_t id) {
                    answer.assign(reply.begin(), reply.end());
                    session = std::move(s), session_id = id;
                  },
                  [&](caf::error& e) {
                    why = "the gateway did not answer: " + caf::to_string(e);
                    const wire_bytes refusal = error_payload(ErrorCode::rpc_failed, why);
                    answer.assign(refusal.begin(), refusal.end());
                  });
          if (!session && why.empty()) why = "hello refused";
          if (session) {
            lifeline = true;
            life = std::make_shared<SessionLife>();
            life->last_frame_ms.store(steady_ms());
            life->lifeline_fd = fd;
            std::lock_guard<std::mutex> lock(mutex_);
            lives_[session_id] = life;
          }
        }
      }
      if (session && header.route == kAttachRoute) {
        // A further connection of a session opened on the channel counts
        // as its life too (the client's pings travel on one).
        std::lock_guard<std::mutex> lock(mutex_);
        if (const auto it = lives_.find(session_id); it != lives_.end()) life = it->second;
      }
      const int writer_fd = session ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
      if (session && writer_fd < 0) why = std::string("cannot share the connection: ") + std::strerror(errno);
      if (!why.empty()) {
        (void)send_text_frame(fd, header, answer.empty() ? why : answer);
        open = false;
        break;
      }
      // Answered before the writer exists, so nothing else writes yet.
      if (!send_text_frame(fd, header, answer)) {
        ::close(writer_fd);
        why = "the worker did not take the " + std::string(route_name(header.route)) + " answer";
        open = false;
        break;
      }
      writer = system_.spawn(channel_writer, caf::actor_cast<session_actor>(session), pool_descriptors_, writer_fd);
    }
  }
  if (!why.empty())
    logger_or_default(obs_.log).warn("actor=channel session={} closing the session channel: {}", session_id, why);
  if (writer) caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  if (lifeline) {
    // The session opened on this connection ends with it: closed by its
    // client, or silenced by the liveness watch (a worker lost).
    caf::anon_send(gateway_, channel_closed_atom::value, session_id, life->silenced.load());
    std::lock_guard<std::mutex> lock(mutex_);
    lives_.erase(session_id);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Out of open_ before the close, so shutdown never meets a reused number.
  open_.erase(fd);
  ::close(fd);
  --threads_;
  all_done_.notify_all();
}

}  // namespace kvrt::actors
