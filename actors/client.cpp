#include "actors/client.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/actor_protocol.hpp"
#include "actors/actor_settings.hpp"
#include "actors/gateway_connect.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"
#include "services/common/process_identity.hpp"
#include "services/session/owner_stat_value.hpp"
#include "services/session/session_channel.hpp"
#include "services/telemetry/chrome_trace.hpp"

namespace kvrt {

namespace {

// "<route>.call": the worker's slice of one call, paired with the node's
// "<route>.batch". Built once per route (TraceSlice keeps a view of it).
std::string_view call_slice_name(RouteId route, std::string_view name) {
  static std::mutex mutex;
  static std::map<uint16_t, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = names.try_emplace(route.value);
  if (added) it->second = std::string(name) + ".call";
  return it->second;
}

// A stats reader connects the way a client does, under the default call timeout.
constexpr std::chrono::milliseconds kStatsConnectTimeout{30000};

Error transport_error(const std::string& what, const caf::error& e) {
  if (e == caf::sec::request_timeout) return make_error(ErrorCode::rpc_timeout, what + ": no reply in time", what);
  return make_error(ErrorCode::rpc_failed, what + ": " + caf::to_string(e), what);
}

// The node monitors this actor; it has nothing to say. A class, not a
// function actor: CAF 0.17 spawns a function actor without arguments by
// dereferencing a null argument tuple (undefined behaviour that UBSan reports).
using anchor_atom = caf::atom_constant<caf::atom("anchor")>;  // nothing sends it
class AnchorActor final : public caf::event_based_actor {
 public:
  using caf::event_based_actor::event_based_actor;
  caf::behavior make_behavior() override {
    return {[](anchor_atom) {}};
  }
};

// What the watch of a session and the calling thread share. The watch may
// outlive neither the Client nor its channel: ~Client detaches both first.
struct SessionWatchState {
  std::mutex mutex;
  std::optional<Error> lost;          // set once: every later call answers it
  std::atomic<bool> is_lost{false};   // lost.has_value(), for calls that do not take the mutex
  caf::message_id pending;            // the middleman call awaiting its reply (not a response id: none)
  caf::strong_actor_ptr caller;       // the scoped actor that waits for `pending`
  SessionChannel* channel = nullptr;  // interrupted when the session is lost
  ProcessIdentity node;               // the node process, from its descriptor
  std::string node_name;              // "host:port (pid N)", for the reasons

  // The first loss decides the error. A connection that went silent, or a
  // node process that has exited (or whose pid now names a later process),
  // is a lost node; a live node that closed the session ended it. A killed
  // process closes its sockets before it becomes a zombie, so a node seen
  // alive is given a moment to finish exiting. Call with `mutex` held.
  const Error& lose(const std::string& cause, bool connection_lost = false) {
    if (lost) return *lost;
    bool alive = !connection_lost && node.pid > 0 && owner_state(node) == OwnerState::alive;
    for (int i = 0; alive && i < 20; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      alive = owner_state(node) == OwnerState::alive;
    }
    lost = alive ? make_error(ErrorCode::session_ended, "the node at " + node_name + " ended this session: " + cause,
                              "session")
                 : make_error(ErrorCode::node_lost,
                              "the node at " + node_name + " is gone (" + cause +
                                  "); its receipts, handles and leases are void: connect again",
                              "node");
    is_lost.store(true, std::memory_order_release);
    if (channel) channel->interrupt();
    // Wakes a blocked middleman call the way CAF's own request timeout does:
    // an error message under the awaited response id.
    if (pending.is_response() && caller)
      caller->enqueue(nullptr, pending, caf::make_message(caf::make_error(caf::sec::request_receiver_down)), nullptr);
    return *lost;
  }
};

// Watches the node's gateway: its proxy, like every proxy of the node's
// actors, dies when the middleman connection drops, at once for a node that
// died (the kernel closes its sockets) and after connection_timeout_ms of
// missed heartbeats for a hung one. (A session the node ends while it lives
// closes the session channel, or answers the middleman with an error.)
class SessionWatch final : public caf::event_based_actor {
 public:
  SessionWatch(caf::actor_config& cfg, caf::actor gateway, std::shared_ptr<SessionWatchState> state)
      : caf::event_based_actor(cfg), gateway_(std::move(gateway)), state_(std::move(state)) {}
  caf::behavior make_behavior() override {
    monitor(gateway_);
    set_down_handler([state = state_](const caf::down_msg& down) {
      std::lock_guard<std::mutex> lock(state->mutex);
      // remote_link_unreachable: the connection closed or missed its
      // heartbeats; any other reason: the node stopped its gateway.
      const bool connection_lost = down.reason == caf::exit_reason::remote_link_unreachable;
      state->lose("the node's gateway is down: " + caf::to_string(down.reason), connection_lost);
    });
    return {[](anchor_atom) {}};
  }

 private:
  caf::actor gateway_;
  std::shared_ptr<SessionWatchState> state_;
};

}  // namespace

struct Client::Impl {
  explicit Impl(const ClientOptions& o) : options(o), system(configure(cfg, o)), self(system) {}
  // Every actor this client spawned must exit before the actor system's
  // destructor, which waits for all of them: a connect that failed after
  // the anchor was spawned would otherwise never return.
  ~Impl() {
    stop_keepalive();
    {
      std::lock_guard<std::mutex> lock(watch->mutex);
      watch->channel = nullptr;
      watch->caller = nullptr;
    }
    if (watcher) caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
    if (anchor) close_anchor();
  }
  // The anchor's exit is how the node learns that this client closed its
  // session rather than lost it. The exit reaches the node as a message on
  // the middleman's connection, which the actor system's shutdown closes
  // right after: without a wait the node may see the connection drop first
  // and reclaim the session as a worker lost. So the client awaits the
  // anchor's termination, then one echo of the node's gateway, which the
  // same connection carries after the exit (its order is the send order)
  // and the gateway answers after the anchor's down message (it monitors
  // the anchor). Not the session actor: the anchor's exit ends the session,
  // and a message to an actor that is gone may be dropped unanswered, which
  // held a closing worker for the whole wait.
  void close_anchor() {
    const bool live =
        session_handle != nullptr && gateway != nullptr && !watch->is_lost.load(std::memory_order_acquire);
    self->monitor(anchor);
    caf::anon_send_exit(anchor, caf::exit_reason::user_shutdown);
    const auto wait = std::chrono::milliseconds(std::min<uint32_t>(options.connection_timeout_ms, 2000));
    self->receive([](const caf::down_msg&) {}, caf::after(wait) >> [] {});
    if (!live) return;
    self->request(gateway, caf::timespan{wait}, actors::ping_atom::value).receive([](bool) {}, [](caf::error&) {});
  }
  static caf::actor_system_config& configure(caf::actor_system_config& cfg, const ClientOptions& o) {
    actors::apply_runtime_settings(
        cfg, actors::RuntimeSettings{o.scheduler_threads, o.heartbeat_interval_ms, o.connection_timeout_ms});
    return cfg;
  }

  // One blocking round trip to the session actor: through the session
  // channel while it works, else through the middleman. Once the session is
  // lost (the node died or ended it) every call answers that at once.
  Result<std::vector<uint8_t>> call(RouteId route, std::span<const uint8_t> bytes, const char* what) {
    if (route == kAttachRoute || route == kHelloRoute)
      return make_error(ErrorCode::invalid_argument,
                        "the " + std::string(route_name(route)) + " route is the session channel's own", what);
    // The mutex only once the session is lost: a call on a live session
    // pays one atomic load for the watch.
    if (watch->is_lost.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(watch->mutex);
      return *watch->lost;
    }
    if (options.channel_only) {
      // The channel is the session: once it broke, so did the session.
      Result<std::vector<uint8_t>> reply = channel && !channel->broken()
                                               ? channel->call(route, bytes, options.timeout)
                                               : Result<std::vector<uint8_t>>(make_error(
                                                     ErrorCode::session_ended, "the session channel is broken", what));
      if (reply.ok()) return reply;
      std::lock_guard<std::mutex> lock(watch->mutex);
      return watch->lose(reply.error().reason);
    }
    if (channel && !channel->broken()) {
      Result<std::vector<uint8_t>> reply = channel->call(route, bytes, options.timeout);
      // A closed channel is a lost session, not a reason to try the middleman:
      // a dead node would hold that call until its timeout. A slow reply
      // leaves the rest of the session to the middleman.
      if (!reply.ok() && channel->break_cause() == SessionChannel::Break::closed) {
        std::lock_guard<std::mutex> lock(watch->mutex);
        return watch->lose(reply.error().reason);
      }
      return reply;
    }
    Result<std::vector<uint8_t>> out = make_error(ErrorCode::rpc_failed, "no reply", what);
    auto handle = self->request(session_handle, caf::timespan{options.timeout}, actors::route_atom::value, route.value,
                                actors::wire_bytes(bytes.begin(), bytes.end()));
    {
      std::lock_guard<std::mutex> lock(watch->mutex);
      if (watch->lost) return *watch->lost;  // lost before the watch could see this call
      watch->pending = handle.id();
    }
    handle.receive([&](actors::wire_bytes& reply) { out = std::vector<uint8_t>(reply.begin(), reply.end()); },
                   [&](caf::error& e) { out = transport_error(what, e); });
    std::lock_guard<std::mutex> lock(watch->mutex);
    watch->pending = caf::message_id{};
    if (!out.ok() && watch->lost) return *watch->lost;
    return out;
  }

  // A connection of the session's own beside the calls' channel (the
  // keepalive's, the pool descriptors'). A live node answers its attach, so
  // one that could not be reached, or was closed or refused without an
  // answer, means the node died or ended the session, and the watch decides
  // which (node_lost or session_ended), as for a call. A slow reply stays a
  // timeout; anything else is that connection's own error.
  Error side_connection_failed(const Error& e) {
    if (e.code != ErrorCode::node_unreachable && e.code != ErrorCode::rpc_failed && e.code != ErrorCode::session_ended)
      return e;
    std::lock_guard<std::mutex> lock(watch->mutex);
    return watch->lose(e.reason);
  }

  // channel_only: a second connection of the session pings the node, so the
  // node sees this process alive and this client sees the node.
  void start_keepalive(std::unique_ptr<SessionChannel> pinger) {
    keepalive_channel = std::move(pinger);
    keepalive = std::thread([this] {
      const auto every = std::chrono::milliseconds(options.heartbeat_interval_ms);
      const auto wait = std::chrono::milliseconds(options.connection_timeout_ms);
      std::unique_lock<std::mutex> lock(keepalive_mutex);
      while (!keepalive_stop) {
        keepalive_wake.wait_for(lock, every, [this] { return keepalive_stop; });
        if (keepalive_stop) break;
        lock.unlock();
        Result<std::vector<uint8_t>> echo = keepalive_channel->call(kPingRoute, {}, wait);
        lock.lock();
        if (echo.ok() || keepalive_stop) continue;
        std::lock_guard<std::mutex> w(watch->mutex);
        watch->lose("the node stopped answering pings: " + echo.error().reason,
                    keepalive_channel->break_cause() == SessionChannel::Break::closed);
        break;
      }
    });
  }
  void stop_keepalive() {
    if (!keepalive.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(keepalive_mutex);
      keepalive_stop = true;
    }
    keepalive_wake.notify_all();
    keepalive_channel->interrupt();
    keepalive.join();
  }

  ClientOptions options;
  caf::actor_system_config cfg;
  caf::actor_system system;
  caf::scoped_actor self;
  caf::actor anchor;
  actors::gateway_actor gateway;  // the node's; null for a session on the channel only
  std::shared_ptr<SessionWatchState> watch = std::make_shared<SessionWatchState>();
  caf::actor watcher;
  actors::session_actor session_handle;
  SessionReceipt session;
  std::unique_ptr<SessionChannel> channel;            // null: the middleman only
  std::unique_ptr<SessionChannel> keepalive_channel;  // channel_only: the pings' connection
  std::thread keepalive;
  std::mutex keepalive_mutex;
  std::condition_variable keepalive_wake;
  bool keepalive_stop = false;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

Result<std::unique_ptr<Client::Impl>> Client::connect_on_channel(const NodeDescriptor& node,
                                                                 const std::string& token_hex,
                                                                 const ClientOptions& options) {
  if (node.channel_socket.empty())
    return make_error(ErrorCode::invalid_argument,
                      "the node at " + node.address() +
                          " offers no session channel ([node] session_channel = false): connect through the "
                          "middleman",
                      "channel_only");
  auto impl = std::make_unique<Client::Impl>(options);
  SessionWatchState& w = *impl->watch;
  w.node = node.process();
  w.node_name = node.address_and_pid();
  const HelloRequest hello{token_hex, options.worker_name, static_cast<uint32_t>(::getpid())};
  Result<SessionChannel::Opened> opened =
      SessionChannel::open_session(options.channel_socket.empty() ? node.channel_socket : options.channel_socket,
                                   codec::encode(hello), options.timeout);
  if (!opened.ok()) return opened.error();
  Result<SessionReceipt> receipt = decode_reply<SessionReceipt>(opened->reply);
  if (!receipt.ok()) return receipt.error();
  impl->session = std::move(*receipt);
  impl->channel = std::move(opened->channel);
  // The pings go straight to the node's socket, past any proxy.
  Result<std::unique_ptr<SessionChannel>> pinger =
      SessionChannel::attach(node.channel_socket, impl->session.channel_ticket, options.timeout);
  if (!pinger.ok()) return impl->side_connection_failed(pinger.error());
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.channel = impl->channel.get();
  }
  impl->start_keepalive(std::move(pinger).value());
  return impl;
}

Result<std::unique_ptr<Client>> Client::connect(const NodeDescriptor& node, const std::string& token_hex,
                                                const ClientOptions& options) {
  if (options.channel_only) {
    Result<std::unique_ptr<Impl>> impl = connect_on_channel(node, token_hex, options);
    if (!impl.ok()) return impl.error();
    return std::unique_ptr<Client>(new Client(std::move(impl).value()));
  }
  auto impl = std::make_unique<Impl>(options);
  actors::GatewayConnection connection = actors::connect_gateway(impl->system, node, options.timeout);
  if (!connection.gateway.ok()) {
    if (connection.connect_in_flight) actors::retire_in_background(std::move(impl));
    return connection.gateway.error();
  }
  auto gateway = std::move(connection.gateway);
  impl->anchor = impl->system.spawn<AnchorActor>();
  impl->gateway = *gateway;
  // The watch starts before the hello: a node that dies while the hello is
  // in flight fails the connect at once, not at the call timeout.
  SessionWatchState& w = *impl->watch;
  w.node = node.process();
  w.node_name = node.address_and_pid();
  w.caller = caf::actor_cast<caf::strong_actor_ptr>(impl->self);
  impl->watcher = impl->system.spawn<SessionWatch>(caf::actor_cast<caf::actor>(*gateway), impl->watch);
  HelloRequest hello{token_hex, options.worker_name, static_cast<uint32_t>(::getpid())};
  Result<SessionReceipt> receipt = make_error(ErrorCode::rpc_failed, "no reply", "hello");
  caf::actor session;
  auto handle = impl->self->request(*gateway, caf::timespan{options.timeout}, actors::hello_atom::value,
                                    actors::to_wire(codec::encode(hello)), impl->anchor);
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (w.lost) return *w.lost;
    w.pending = handle.id();
  }
  handle.receive(
      [&](actors::wire_bytes& reply, caf::actor& s) {
        receipt = decode_reply<SessionReceipt>(actors::as_span(reply));
        session = std::move(s);
      },
      [&](caf::error& e) { receipt = transport_error("hello", e); });
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.pending = caf::message_id{};
    if (!receipt.ok() && w.lost) return *w.lost;
  }
  if (!receipt.ok()) return receipt.error();
  if (!session) return make_error(ErrorCode::rpc_failed, "the node opened no session actor", "hello");
  impl->session = std::move(*receipt);
  impl->session_handle = caf::actor_cast<actors::session_actor>(session);
  if (options.use_session_channel && !impl->session.channel_socket.empty()) {
    Result<std::unique_ptr<SessionChannel>> channel =
        SessionChannel::attach(options.channel_socket.empty() ? impl->session.channel_socket : options.channel_socket,
                               impl->session.channel_ticket, options.timeout);
    // A node whose channel cannot be reached is still served through the middleman.
    if (channel.ok()) impl->channel = std::move(channel).value();
  }
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (w.lost) return *w.lost;
    w.channel = impl->channel.get();
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const SessionReceipt& Client::session() const { return impl_->session; }

bool Client::on_session_channel() const { return impl_->channel && !impl_->channel->broken(); }

Result<std::vector<uint8_t>> Client::call_route(RouteId route, std::string_view name, std::span<const uint8_t> bytes,
                                                const TraceContext& trace) {
  const std::string what(name);
  std::optional<TraceSlice> slice;
  if (impl_->options.trace) {
    static_assert(std::tuple_size_v<Routes> < 64, "call slice names are kept per route id");
    slice.emplace(impl_->options.trace, impl_->options.worker_name, call_slice_name(route, name), trace);
    impl_->options.trace->flow_start(impl_->options.worker_name, ChromeTraceRecorder::now_us(), flow_id(trace));
  }
  return impl_->call(route, bytes, what.c_str());
}

Result<std::vector<uint8_t>> Client::raw(RouteId route, const std::vector<uint8_t>& bytes) {
  return impl_->call(route, bytes, "raw");
}

Result<PoolDescriptors> Client::pool_descriptors() {
  const SessionReceipt& s = impl_->session;
  if (s.channel_socket.empty() || s.channel_ticket.empty())
    return make_error(ErrorCode::invalid_argument,
                      "the node offers no session channel, so it cannot hand over pool descriptors", "channel");
  // A connection of its own, straight to the node's socket: a proxy between
  // the client and the node (ClientOptions::channel_socket) forwards bytes,
  // not descriptors, and the calls' channel stays untouched.
  Result<std::unique_ptr<SessionChannel>> channel =
      SessionChannel::attach(s.channel_socket, s.channel_ticket, impl_->options.timeout);
  if (!channel.ok()) return impl_->side_connection_failed(channel.error());
  PoolDescriptors out;
  const std::vector<uint8_t> request = codec::encode(PoolDescriptorRequest{});
  Result<std::vector<uint8_t>> reply =
      (*channel)->call(PoolDescriptorsRoute::id, request, impl_->options.timeout, &out.descriptors);
  if (!reply.ok()) return impl_->side_connection_failed(reply.error());
  Result<PoolDescriptorReceipt> receipt = decode_reply<PoolDescriptorReceipt>(*reply);
  if (!receipt.ok()) return receipt.error();
  if (out.descriptors.size() != receipt->pools.size())
    return make_error(ErrorCode::pool_fd_missing,
                      "the node named " + std::to_string(receipt->pools.size()) + " pools and sent " +
                          std::to_string(out.descriptors.size()) + " descriptors",
                      "pools");
  out.pools = std::move(receipt->pools);
  return out;
}

const OwnerStats* NodeStats::owner(const std::string& name) const {
  for (const OwnerStats& o : owners)
    if (o.owner == name) return &o;
  return nullptr;
}

std::optional<int64_t> NodeStats::value(const std::string& owner_name, const std::string& name) const {
  return owner_stat_value(owners, owner_name, name);
}

struct NodeStatsReader::Impl {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> system;
  actors::gateway_actor gateway;
};

NodeStatsReader::NodeStatsReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeStatsReader::~NodeStatsReader() = default;

Result<std::unique_ptr<NodeStatsReader>> NodeStatsReader::connect(const NodeDescriptor& node) {
  auto impl = std::make_unique<Impl>();
  actors::apply_runtime_settings(impl->cfg, actors::RuntimeSettings{1, 250, 2000});
  impl->system = std::make_unique<caf::actor_system>(impl->cfg);
  actors::GatewayConnection connection = actors::connect_gateway(*impl->system, node, kStatsConnectTimeout);
  if (!connection.gateway.ok()) {
    if (connection.connect_in_flight) actors::retire_in_background(std::move(impl));
    return connection.gateway.error();
  }
  impl->gateway = *connection.gateway;
  return std::unique_ptr<NodeStatsReader>(new NodeStatsReader(std::move(impl)));
}

Result<NodeStats> NodeStatsReader::read(bool validate, std::chrono::milliseconds timeout) {
  Result<NodeStats> out = make_error(ErrorCode::rpc_failed, "no reply", "stats");
  caf::scoped_actor self{*impl_->system};
  self->request(impl_->gateway, caf::timespan{timeout}, actors::stats_atom::value, validate)
      .receive(
          [&](actors::wire_bytes& reply) {
            Result<NodeStatsReceipt> receipt = codec::decode<NodeStatsReceipt>(actors::as_span(reply));
            if (!receipt.ok()) {
              out = receipt.error();
              return;
            }
            out = NodeStats{std::move(receipt->owners)};
          },
          [&](caf::error& e) { out = transport_error("stats", e); });
  return out;
}

Result<NodeStats> read_node_stats(const NodeDescriptor& node, bool validate, std::chrono::milliseconds timeout) {
  auto reader_result = NodeStatsReader::connect(node);
  if (!reader_result.ok()) return reader_result.error();
  std::unique_ptr<NodeStatsReader> reader = std::move(reader_result).value();
  return reader->read(validate, timeout);
}

}  // namespace kvrt
