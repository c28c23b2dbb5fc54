// `kvrt bench rpc`: see rpc_bench.hpp. The raw floors run first, in a forked
// child that only echoes bytes (fork before this process starts any actor
// system thread, docs/stack-notes.md); the cross-process rows drive a `kvrt node`
// child (this same binary) through kvrt::Client.
#include "bench/rpc_bench.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "actors/client.hpp"
#include "actors/rpc_probe.hpp"
#include "schema/codecs.hpp"
#include "services/allocator/allocator_service.hpp"
#include "services/common/child_process.hpp"

namespace kvrt::bench {

namespace {

struct Percentiles {
  double p50 = 0, p99 = 0;  // [us]
};

Percentiles percentiles(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return {};
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

double elapsed_us(uint64_t start_ns) { return double(now_ns() - start_ns) / 1000.0; }

bool full_io(int fd, void* buf, size_t n, bool write_side) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = write_side ? ::write(fd, p, n) : ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Ping-pong between this process and a forked echo child over a connected
// socket pair of the given family: `request_bytes` out, `reply_bytes` back
// (64 and 64: the floor of any small round trip).
Percentiles socket_ping_pong(bool tcp, int iterations, size_t request_bytes = 64, size_t reply_bytes = 64) {
  int parent_fd = -1, child_fd = -1;
  if (tcp) {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener, 1);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    parent_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(parent_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    child_fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    const int one = 1;
    ::setsockopt(parent_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(child_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  } else {
    int fds[2];
    ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
    parent_fd = fds[0];
    child_fd = fds[1];
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(parent_fd);
    std::vector<uint8_t> buf(std::max(request_bytes, reply_bytes), 1);
    while (full_io(child_fd, buf.data(), request_bytes, false) && full_io(child_fd, buf.data(), reply_bytes, true)) {
    }
    ::_exit(0);
  }
  ::close(child_fd);
  std::vector<uint8_t> buf(std::max(request_bytes, reply_bytes), 1);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations + iterations / 10; ++i) {
    const uint64_t t = now_ns();
    if (!full_io(parent_fd, buf.data(), request_bytes, true) || !full_io(parent_fd, buf.data(), reply_bytes, false))
      break;
    if (i >= iterations / 10) us.push_back(elapsed_us(t));  // the first tenth warms up
  }
  ::close(parent_fd);
  ::waitpid(child, nullptr, 0);
  return percentiles(std::move(us));
}

BlockAllocatorConfig probe_allocator_config() {
  BlockAllocatorConfig c;
  c.block_size = 16;
  for (uint32_t g = 0; g < 2; ++g)
    c.groups.push_back(GroupPoolConfig{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{1}, 8192, 0, 1024, {}});
  return c;
}

std::vector<AllocatorOp> allocations(uint32_t n) {
  return std::vector<AllocatorOp>(n, AllocatorOp{AllocateOp{16, {}, std::nullopt}});
}

std::vector<AllocatorOp> releases_of(const AllocatorBatchReceipt& r) {
  std::vector<AllocatorOp> ops;
  for (const AllocatorOutcome& o : r.outcomes)
    if (const auto* a = std::get_if<AllocationReceipt>(&o))
      ops.push_back(ReleaseOp{RequestFence{a->request_id, a->request_generation, a->table_version_after},
                              ReleaseReason::finished});
  return ops;
}

// The wire sizes of a batch of `n` AllocateOps and of its receipt, encoded
// by the codec the node uses, from an allocator of the node's shape (two
// cache groups, one bundle per operation): every field is fixed-width, so
// the sizes do not depend on the values. [bytes]
std::pair<size_t, size_t> batch_wire_bytes(uint32_t n) {
  AllocatorService service(BlockAllocator::create(probe_allocator_config()).value());
  const AllocatorBatch batch{{}, allocations(n)};
  return {codec::encode(batch).size(), codec::encode(service.apply(kNodeSession, batch)).size()};
}

// In-process round trips of one AllocateOp batch (encode, actor, allocate,
// encode receipt, decode), each followed by an untimed release. `blocking`:
// from a blocking caller thread (two thread wake-ups per round trip);
// otherwise from an event-based actor of the same actor system, the way an
// engine integrated as an actor calls the owner.
Percentiles inprocess_rtt(int iterations, bool blocking, std::string& error) {
  auto probe = InProcessAllocatorProbe::create(BlockAllocator::create(probe_allocator_config()).value());
  if (!probe.ok()) {
    error = probe.error().describe();
    return {};
  }
  if (!blocking) {
    Result<std::vector<double>> us = (*probe)->actor_driven_rtts(
        iterations / 10, iterations,
        [] {
          return codec::encode(AllocatorBatch{{}, allocations(1)});
        },
        [](const std::vector<uint8_t>& reply) -> Result<std::optional<std::vector<uint8_t>>> {
          Result<AllocatorBatchReceipt> r = codec::decode<AllocatorBatchReceipt>(reply);
          if (!r.ok()) return r.error();
          return std::optional<std::vector<uint8_t>>(codec::encode(AllocatorBatch{{}, releases_of(*r)}));
        });
    if (!us.ok()) {
      error = us.error().describe();
      return {};
    }
    return percentiles(std::move(*us));
  }
  std::vector<double> us;
  for (int i = 0; i < iterations + iterations / 10; ++i) {
    const uint64_t t = now_ns();
    Result<std::vector<uint8_t>> reply = (*probe)->call(codec::encode(AllocatorBatch{{}, allocations(1)}));
    Result<AllocatorBatchReceipt> r =
        reply.ok() ? codec::decode<AllocatorBatchReceipt>(*reply) : Result<AllocatorBatchReceipt>(reply.error());
    if (i >= iterations / 10) us.push_back(elapsed_us(t));
    if (!r.ok()) {
      error = r.error().describe();
      return {};
    }
    (void)(*probe)->call(codec::encode(AllocatorBatch{{}, releases_of(*r)}));  // untimed
  }
  return percentiles(std::move(us));
}

// A `kvrt node` child of this binary on a generated configuration.
class NodeChild {
 public:
  // `scheduler_lines`: the node's [node] scheduler settings.
  NodeChild(const std::filesystem::path& dir, const std::string& scheduler_lines) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    const std::string config = (dir_ / "node.toml").string();
    std::ofstream(config) << "[node]\nlayout = \"" << KVRT_SOURCE_DIR
                          << "/config/layouts/small-two-group.toml\"\nblocks_per_group = 4096\nport = 0\n"
                          << scheduler_lines
                          << "max_requests = 4096\n\n[[namespace]]\ndeployment = \"bench\"\ntenant = \"rpc\"\n\n"
                             "[[principal]]\nname = \"bench\"\nnamespaces = [\"bench/rpc\"]\n";
    descriptor_ = (dir_ / "node.json").string();
    // SIGTERM when this process dies: the node removes its segments.
    Result<pid_t> pid = spawn_tied_child("/proc/self/exe", {"node", "--config", config, "--descriptor", descriptor_},
                                         ChildOutput{-1, (dir_ / "node.log").string(), {}, true}, SIGTERM);
    if (pid.ok())
      pid_ = *pid;
    else
      spawn_error_ = pid.error().describe();
  }
  ~NodeChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Result<NodeDescriptor> wait_ready() const {
    if (pid_ <= 0) return make_error(ErrorCode::io, "cannot start a node child: " + spawn_error_, "node");
    for (int i = 0; i < 1500 && !std::filesystem::exists(descriptor_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return read_node_descriptor(descriptor_);
  }

 private:
  std::filesystem::path dir_;
  std::string descriptor_;
  std::string spawn_error_;
  pid_t pid_ = -1;
};

BenchRow us_row(std::string name, double value, std::optional<std::pair<std::string, double>> baseline,
                std::optional<double> target, std::string note = {}) {
  BenchRow row;
  row.name = std::move(name);
  row.value = value;
  row.unit = "us";
  if (baseline) {
    row.baseline_name = baseline->first;
    row.baseline = baseline->second;
  }
  if (target) row.target = Target{*target, Better::lower};
  row.note = std::move(note);
  return row;
}

}  // namespace

Result<std::unique_ptr<Client>> connect_bench_client(const NodeDescriptor& d, bool session_channel) {
  Result<std::string> token = read_token_file(d.token_path("bench"));
  if (!token.ok()) return token.error();
  ClientOptions options;
  options.use_session_channel = session_channel;
  return Client::connect(d, *token, options);
}

struct CrossProcessRtt {
  Percentiles ping;      // 64 bytes echoed by the session actor
  Percentiles allocate;  // one AllocateOp, its receipt decoded
};

// Alternating echo and allocation round trips (each allocation released,
// untimed), after a 10% warm-up.
Result<CrossProcessRtt> cross_process_rtt(Client& c, int n) {
  std::vector<double> ping_us, alloc_us;
  const std::vector<uint8_t> ping_bytes(64, 7);
  for (int i = 0; i < n + n / 10; ++i) {
    uint64_t t = now_ns();
    Result<std::vector<uint8_t>> echo = c.raw(kPingRoute, ping_bytes);
    if (i >= n / 10) ping_us.push_back(elapsed_us(t));
    if (!echo.ok()) return echo.error();
    t = now_ns();
    Result<AllocatorBatchReceipt> r = c.call(AllocatorBatch{{}, allocations(1)});
    if (i >= n / 10) alloc_us.push_back(elapsed_us(t));
    if (!r.ok()) return r.error();
    (void)c.call(AllocatorBatch{{}, releases_of(*r)});  // untimed
  }
  return CrossProcessRtt{percentiles(std::move(ping_us)), percentiles(std::move(alloc_us))};
}

Status reuse_rows(Client& c, int n, BenchReport& rep) {
  const std::string ns = "bench/rpc";
  if (Result<NamespaceGrantReceipt> g = c.call(AuthorizeRequest{{}, ns}); !g.ok()) return g.error();
  std::vector<TokenId> prompt(80);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(7000 + i);
  // Serve and publish the prompt's four full blocks.
  Result<AllocatorBatchReceipt> a = c.call(AllocatorBatch{{}, {AllocateOp{80, {}, std::nullopt}}});
  if (!a.ok()) return a.error();
  const auto* r = std::get_if<AllocationReceipt>(&a->outcomes.at(0));
  if (r == nullptr) return std::get<Error>(a->outcomes[0]);
  const RequestFence fence{r->request_id, r->request_generation, r->table_version_after};
  if (Result<AllocatorBatchReceipt> k = c.call(AllocatorBatch{{}, {CommitRowsOp{fence, 80}}}); !k.ok())
    return k.error();
  if (Result<PrefixBatchReceipt> p = c.call(PrefixBatch{{}, {PrefixPublishOp{ns, fence.request, prompt, 0, 4}}});
      !p.ok())
    return p.error();
  std::vector<double> tx_us, match_us;
  for (int i = 0; i < n + n / 10; ++i) {
    uint64_t t = now_ns();
    Result<ReuseBatchReceipt> tx = c.call(ReuseBatch{
        {}, {ReuseAcquireOp{ns, RequestId{0}, RequestGeneration{0}, prompt, LogitsPath::logits_required, false}}});
    if (i >= n / 10) tx_us.push_back(elapsed_us(t));
    if (!tx.ok()) return tx.error();
    const auto* receipt = std::get_if<ExecutableReuseReceipt>(&tx->outcomes.at(0));
    if (receipt == nullptr) return make_error(ErrorCode::invariant_violated, "the published prompt was not reused");
    (void)c.call(ReuseBatch{{}, {ReuseReleaseOp{receipt->execution_snapshot_version, false}}});  // untimed
    t = now_ns();
    Result<PrefixBatchReceipt> m =
        c.call(PrefixBatch{{}, {PrefixMatchOp{ns, RequestId{0}, RequestGeneration{0}, prompt, {}}}});
    if (i >= n / 10) match_us.push_back(elapsed_us(t));
    if (!m.ok()) return m.error();
  }
  const Percentiles tx = percentiles(tx_us), match = percentiles(match_us);
  rep.rows.push_back(us_row("reuse_tx_hit_p50", tx.p50, std::make_pair(std::string("prefix_match"), match.p50),
                            std::nullopt,
                            "cross-process: one ReuseAcquireOp hitting 64 tokens (steps 1-8, six owner messages "
                            "inside the node) against a prefix lookup alone"));
  rep.rows.push_back(us_row("reuse_tx_hit_p99", tx.p99, std::nullopt, std::nullopt));
  return Status::success();
}

BenchReport run_rpc_bench(bool quick) {
  const int n = quick ? 200 : 3000;
  BenchReport rep;
  rep.bench = "rpc";
  rep.quick = quick;

  // 1. The physical floor, before any actor system thread exists here.
  const Percentiles tcp = socket_ping_pong(true, n);
  const Percentiles unix_socket = socket_ping_pong(false, n);
  rep.rows.push_back(us_row("raw_tcp_loopback_p50", tcp.p50, std::nullopt, std::nullopt,
                            "64-byte ping-pong between two processes, TCP_NODELAY"));
  rep.rows.push_back(us_row("raw_unix_socket_p50", unix_socket.p50, std::nullopt, std::nullopt,
                            "64-byte ping-pong between two processes, AF_UNIX stream"));
  // The same Unix-socket ping-pong carrying a 256-operation batch's bytes:
  // the transport's share of batch256, whatever the node does with them.
  const auto [batch256_request_bytes, batch256_receipt_bytes] = batch_wire_bytes(256);
  const Percentiles unix_batch256 =
      socket_ping_pong(false, quick ? 200 : 1000, batch256_request_bytes, batch256_receipt_bytes);
  rep.rows.push_back(
      us_row("raw_unix_batch256_bytes_p50", unix_batch256.p50, std::make_pair(std::string("raw_unix"), unix_socket.p50),
             std::nullopt,
             "the same ping-pong carrying a 256-AllocateOp batch's bytes: " + std::to_string(batch256_request_bytes) +
                 " out, " + std::to_string(batch256_receipt_bytes) + " back (its receipt)"));

  // 2. In-process: the allocator actor and its caller in one actor system.
  std::string error;
  const Percentiles inproc = inprocess_rtt(n, false, error);
  if (!error.empty()) rep.notes.push_back("in-process probe failed: " + error);
  rep.rows.push_back(us_row("rtt_inprocess_p50", inproc.p50, std::nullopt, 5.0,
                            "one AllocateOp batch: encode, actor, allocate, encode receipt, decode; the caller is "
                            "an event-based actor of the same actor system"));
  rep.rows.push_back(us_row("rtt_inprocess_p99", inproc.p99, std::nullopt, std::nullopt));
  error.clear();
  const Percentiles blocking = inprocess_rtt(n, true, error);
  if (!error.empty()) rep.notes.push_back("in-process blocking probe failed: " + error);
  rep.rows.push_back(us_row("rtt_inprocess_blocking_p50", blocking.p50, std::nullopt, std::nullopt,
                            "the same round trip from a blocking caller thread: two thread wake-ups"));

  // 3. Across processes: a node child and this process as its worker. The
  // node polls on one scheduler thread ([node] scheduler = "polling"); the
  // worker calls through its session channel, as kvrt::Client does by
  // default. Beside it, in the same run: the same node through the
  // middleman, and a node on the sharing scheduler (the default of a node
  // that shares its cores with its workers, as `kvrt run` does).
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvrt-bench-rpc-" + std::to_string(::getpid()));
  NodeChild node(dir / "polling", "scheduler = \"polling\"\nscheduler_threads = 1\n");
  Result<NodeDescriptor> d = node.wait_ready();
  if (!d.ok()) {
    rep.notes.push_back("cross-process rows skipped: " + d.error().describe());
    return rep;
  }
  Result<std::unique_ptr<Client>> client = connect_bench_client(*d, true);
  if (!client.ok()) {
    rep.notes.push_back("cross-process rows skipped: " + client.error().describe());
    return rep;
  }
  Client& c = **client;
  if (!c.on_session_channel()) rep.notes.push_back("the node offered no session channel: rows are the middleman's");
  Result<CrossProcessRtt> channel = cross_process_rtt(c, n);
  if (!channel.ok()) {
    rep.notes.push_back("cross-process allocation failed: " + channel.error().describe());
    return rep;
  }
  rep.rows.push_back(us_row("channel_ping_p50", channel->ping.p50,
                            std::make_pair(std::string("raw_unix"), unix_socket.p50), std::nullopt,
                            "64 bytes to the session actor and back over the session channel (no owner)"));
  rep.rows.push_back(us_row("rtt_crossprocess_p50", channel->allocate.p50,
                            std::make_pair(std::string("raw_tcp"), tcp.p50), 2.0 * tcp.p50,
                            "one AllocateOp over the session channel; target: 2x the raw loopback floor above"));
  rep.rows.push_back(us_row("rtt_crossprocess_p99", channel->allocate.p99, std::nullopt, std::nullopt));
  {
    Result<std::unique_ptr<Client>> basp = connect_bench_client(*d, false);
    Result<CrossProcessRtt> middleman =
        basp.ok() ? cross_process_rtt(**basp, n) : Result<CrossProcessRtt>(basp.error());
    if (middleman.ok()) {
      rep.rows.push_back(us_row("caf_transport_ping_p50", middleman->ping.p50,
                                std::make_pair(std::string("raw_tcp"), tcp.p50), std::nullopt,
                                "the same echo through CAF's middleman (BASP)"));
      rep.rows.push_back(us_row("rtt_middleman_p50", middleman->allocate.p50,
                                std::make_pair(std::string("raw_tcp"), tcp.p50), std::nullopt,
                                "the same AllocateOp through CAF's middleman"));
    } else {
      rep.notes.push_back("middleman rows skipped: " + middleman.error().describe());
    }
  }
  {
    NodeChild sharing_node(dir / "sharing", "scheduler = \"sharing\"\nscheduler_threads = 2\n");
    Result<NodeDescriptor> sd = sharing_node.wait_ready();
    Result<std::unique_ptr<Client>> sc =
        sd.ok() ? connect_bench_client(*sd, true) : Result<std::unique_ptr<Client>>(sd.error());
    Result<CrossProcessRtt> sharing = sc.ok() ? cross_process_rtt(**sc, n) : Result<CrossProcessRtt>(sc.error());
    if (sharing.ok())
      rep.rows.push_back(us_row("rtt_sharing_node_p50", sharing->allocate.p50,
                                std::make_pair(std::string("raw_tcp"), tcp.p50), std::nullopt,
                                "the same AllocateOp over the channel to a node on the sharing scheduler "
                                "(2 threads that sleep when idle)"));
    else
      rep.notes.push_back("sharing-node row skipped: " + sharing.error().describe());
  }

  // 4. Batches: one scheduler iteration's operations in one message.
  double single_batch_us = 0;
  for (const uint32_t size : {1u, 16u, 256u}) {
    const int trials = quick ? 20 : std::max(40, 4000 / static_cast<int>(size));
    std::vector<double> per_batch;
    for (int i = 0; i < trials; ++i) {
      const uint64_t t = now_ns();
      Result<AllocatorBatchReceipt> r = c.call(AllocatorBatch{{}, allocations(size)});
      per_batch.push_back(elapsed_us(t));
      if (r.ok()) (void)c.call(AllocatorBatch{{}, releases_of(*r)});
    }
    const double p50 = percentiles(per_batch).p50;
    if (size == 1) single_batch_us = p50;
    rep.rows.push_back(us_row("batch" + std::to_string(size) + "_per_op", p50 / size, std::nullopt, std::nullopt,
                              "cross-process, batch of " + std::to_string(size) + " AllocateOps, p50 / size"));
    if (size == 256) {
      BenchRow ratio;
      ratio.name = "batch256_over_single";
      ratio.value = single_batch_us > 0 ? p50 / single_batch_us : 0;
      ratio.unit = "x";
      ratio.target = Target{2.0, Better::lower};
      ratio.note = "latency of a 256-operation batch over a 1-operation batch";
      rep.rows.push_back(ratio);
      // What the same ratio would be if the node and the client cost nothing:
      // the bytes of the 256-op batch and its receipt over the raw socket,
      // over the 1-op round trip measured here.
      BenchRow floor;
      floor.name = "batch256_transport_floor_over_single";
      floor.value = single_batch_us > 0 ? unix_batch256.p50 / single_batch_us : 0;
      floor.unit = "x";
      floor.note = "raw_unix_batch256_bytes_p50 over batch1: the ratio's floor from moving the bytes alone";
      rep.rows.push_back(floor);
    }
  }
  // 5. The executable-reuse transaction (0x0CD) for one request whose first
  // 64 tokens are published: one message, which the node answers after one
  // message to each of its owners per step. Beside it, the lookup alone.
  if (Status s = reuse_rows(c, n, rep); !s.ok()) rep.notes.push_back("reuse rows skipped: " + s.error().describe());
  rep.notes.push_back("latencies are p50/p99 over " + std::to_string(n) + " round trips after a 10% warm-up");
  rep.notes.push_back(
      "node: CAF 0.17 work-stealing scheduler polling on 1 thread ([node] scheduler = \"polling\"), "
      "middleman.workers=0; this process: sharing, 1 thread; calls over the session channel "
      "unless a row says middleman");
  return rep;
}

}  // namespace kvrt::bench
