#pragma once
// kvrt::Client: the C++ client library a worker (or an inference engine)
// links to talk to a node (issue 5). No CAF in this header: an engine
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
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/authorization_types.hpp"
#include "schema/executor_types.hpp"
#include "schema/mapper_types.hpp"
#include "schema/prefix_types.hpp"
#include "schema/reuse_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"
#include "services/session/channel_frame.hpp"
#include "services/session/node_descriptor.hpp"

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
};

// The owner a raw call goes to (tests and benchmarks of the transport): the
// session channel's routes (attach is the channel's own and is refused).
using RawRoute = ChannelRoute;

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

  Result<NamespaceGrantReceipt> authorize(const std::string& namespace_name, TraceContext trace = {});
  Result<AllocatorBatchReceipt> allocator(const AllocatorBatch& batch);
  Result<PrefixBatchReceipt> prefix(const PrefixBatch& batch);
  // The mapper owner (issue 6); a node without a [mapper] section answers a
  // typed error. Pages become visible in this process through a
  // MapperPoolView (services/mapper/page_pool_channel.hpp) fed the receipts.
  Result<MapperBatchReceipt> mapper(const MapperBatch& batch);
  // The kernel executor owner: decode attention over the node's pools for
  // requests this session holds.
  Result<ExecuteBatchReceipt> execute(const ExecuteBatch& batch);

  // The executable-reuse transaction (0x0CD): the node runs steps 1-8 for
  // each op across its owners and answers a receipt (with leases this
  // session then holds) or the rejection's step, reason and bucket
  // (services/reuse/reuse_ops.hpp).
  Result<ReuseBatchReceipt> reuse(const ReuseBatch& batch);

  // Sends bytes as they are and returns the reply's bytes: the transport
  // floor (ping) and the node's handling of malformed input (tests).
  Result<std::vector<uint8_t>> raw(RawRoute route, const std::vector<uint8_t>& bytes);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Every owner's statistics read live from a running node (`kvrt stats`).
struct NodeStats {
  std::vector<OwnerStats> owners;  // allocator, prefix_index, authorization, [mapper,] executor, node
  const OwnerStats* owner(const std::string& name) const;
  // The named value of the named owner, or nullopt.
  std::optional<int64_t> value(const std::string& owner, const std::string& name) const;
};
Result<NodeStats> read_node_stats(const NodeDescriptor& node,
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
  Result<NodeStats> read(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Impl;
  explicit NodeStatsReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt
