#pragma once
// kvrt::Client: the C++ client library a worker (or an inference engine)
// links to talk to a node. No CAF in this header: an engine
// includes it without the actor runtime's compile cost.
//
// connect() presents the principal's token to the node's gateway and opens a
// session; every call after that is one message to the session actor and one
// receipt back, through the session channel when the node offers one (a
// Unix socket this thread reads and writes itself, the fast path) and
// otherwise through CAF's middleman. A batch answers one outcome per operation; a transport
// failure or a refused message answers a typed Error instead. The session
// ends when the Client is destroyed (or the process dies: the node notices
// through its heartbeats and reclaims everything the session held).
//
// The node's own death: a Client watches its session, and when the node
// exits (its sockets close at once) or stops answering heartbeats
// (ClientOptions::connection_timeout_ms), the call in flight and every later
// call answer node_lost within that time, on either transport, never at the
// call timeout. Nothing of the old node survives it (docs/operations.md,
// "When the node dies"): an engine drops every receipt, handle and lease and
// connects a new Client when a node serves the descriptor again.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/authorization_types.hpp"
#include "schema/codecs.hpp"
#include "schema/executor_types.hpp"
#include "schema/mapper_types.hpp"
#include "schema/prefix_types.hpp"
#include "schema/reuse_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"
#include "services/common/unique_fd.hpp"
#include "services/session/node_descriptor.hpp"
#include "services/session/routes.hpp"

namespace kvrt {

class ChromeTraceRecorder;

struct ClientOptions {
  std::string worker_name = "worker";
  std::chrono::milliseconds timeout{30000};  // per call
  uint32_t scheduler_threads = 1;
  uint32_t heartbeat_interval_ms = 250;
  uint32_t connection_timeout_ms = 2000;
  ChromeTraceRecorder* trace = nullptr;  // null: tracing off
  // Calls go through the node's session channel when it offers one
  // (services/session/channel_frame.hpp); false, or a node without one:
  // through the middleman. A channel that breaks (timeout, closed) is left
  // for the middleman for the rest of the session.
  bool use_session_channel = true;
  // Empty: the channel socket the node's session receipt names. Otherwise
  // the channel connects here instead: a proxy that forwards to the node's
  // socket (kvrt chaos's transport faults, tools/chaos/channel_fault_proxy.hpp).
  std::string channel_socket;
  // The session opens on the session channel itself (kHelloRoute) and every
  // call travels there: this process never connects to the node's
  // middleman, so the node keeps nothing of it once the session ends (CAF's
  // broker keeps a little per connected process; docs/operations.md). A
  // second connection pings the node every heartbeat_interval_ms: the node
  // ends a session whose connections stay silent for its connection timeout
  // (this process stopped or hung), and this client answers node_lost when
  // the pings stop. No middleman fallback: a call that times out ends the
  // session. Needs a node that offers the channel.
  bool channel_only = false;
};

// The descriptors of the node's unnamed pool segments (PoolAttachment::
// by_descriptor), one per pool, in the order of `pools`.
struct PoolDescriptors {
  std::vector<PoolAttachment> pools;
  std::vector<UniqueFd> descriptors;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> connect(const NodeDescriptor& node, const std::string& token_hex,
                                                 const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const SessionReceipt& session() const;
  // Whether calls currently go through the session channel.
  bool on_session_channel() const;

  // One call on the route that carries `request` (services/session/routes.hpp:
  // an AllocatorBatch goes to the allocator, a ReuseBatch through the
  // executable-reuse transaction of 0x0CD, an AuthorizeRequest asks for a
  // namespace grant, ...), answered by that route's receipt. A batch answers
  // one outcome per operation; a transport failure, or a request the owner
  // refused whole (malformed bytes, a grant not given, a node that serves no
  // such owner), answers a typed Error instead. A request that carries a
  // TraceContext opens a "<route>.call" slice and a flow to the node's.
  template <class Request>
  Result<receipt_of<Request>> call(const Request& request);

  // Sends bytes as they are on a route and returns the reply's bytes: the
  // transport floor (kPingRoute) and the node's handling of malformed input
  // (tests). The channel's own kAttachRoute is refused.
  Result<std::vector<uint8_t>> raw(RouteId route, const std::vector<uint8_t>& bytes);

  // The pool_descriptors route: the descriptors of the unnamed pool segments
  // this session's principal may map, received over a connection of its
  // own to the node's session channel (SCM_RIGHTS). Errors: the route's
  // refusals (services/authorization/authorization_service.hpp),
  // invalid_argument (the node offers no channel), pool_fd_missing (the
  // count of descriptors differs from the receipt's pools), transport errors.
  Result<PoolDescriptors> pool_descriptors();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  // A session opened on the node's session channel alone (ClientOptions::channel_only).
  static Result<std::unique_ptr<Impl>> connect_on_channel(const NodeDescriptor& node, const std::string& token_hex,
                                                          const ClientOptions& options);
  Result<std::vector<uint8_t>> call_route(RouteId route, std::string_view name, std::span<const uint8_t> bytes,
                                          const TraceContext& trace);
  std::unique_ptr<Impl> impl_;
};

// An owner answers either the receipt it was asked for or an ErrorMessage
// (malformed request, refused session): both are decoded here.
template <class T>
Result<T> decode_reply(std::span<const uint8_t> bytes) {
  Result<T> value = codec::decode<T>(bytes);
  if (value.ok()) return value;
  Result<ErrorMessage> refused = codec::decode<ErrorMessage>(bytes);
  if (refused.ok()) return refused->error;
  return value.error();
}

template <class Request>
Result<receipt_of<Request>> Client::call(const Request& request) {
  using R = route_of<Request>;
  TraceContext trace;
  if constexpr (requires { request.trace; }) trace = request.trace;
  Result<std::vector<uint8_t>> reply = call_route(R::id, R::name, codec::encode(request), trace);
  if (!reply.ok()) return reply.error();
  return decode_reply<typename R::Receipt>(*reply);
}

// Every owner's statistics read live from a running node (`kvrt stats`).
struct NodeStats {
  std::vector<OwnerStats> owners;  // allocator, prefix_index, authorization, [mapper,] executor, node
  const OwnerStats* owner(const std::string& name) const;
  // The named value of the named owner, or nullopt. On a node with pools
  // per trust domain ([node] domain_pools) an owner of every domain is named
  // "<owner>@<domain>"; asked by its plain name, the value is the sum over
  // the domains (the counters and pool gauges a run reads add up; a value
  // such as "epoch" is asked of one domain by its full name).
  std::optional<int64_t> value(const std::string& owner, const std::string& name) const;
};
// `validate`: every owner runs its full validate() first (a release build
// otherwise reports only counters; a debug build always validates).
Result<NodeStats> read_node_stats(const NodeDescriptor& node, bool validate = false,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Reads a node's statistics repeatedly over one connection (`kvrt run`
// samples the node many times a second; a connection per read would cost an
// actor system each time).
class NodeStatsReader {
 public:
  static Result<std::unique_ptr<NodeStatsReader>> connect(const NodeDescriptor& node);
  ~NodeStatsReader();
  NodeStatsReader(const NodeStatsReader&) = delete;
  NodeStatsReader& operator=(const NodeStatsReader&) = delete;
  Result<NodeStats> read(bool validate = false, std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Impl;
  explicit NodeStatsReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt
