// The node's own death and restart, with real processes: a `kvrt node`
// killed with SIGKILL (it cleans up nothing) while clients and `kvrt worker`
// processes use it, and a new node started on the same descriptor path.
//
// What must hold (docs/operations.md, "When the node dies"): a client learns
// of the death at its next call, or during the call it is blocked in, on
// either transport, with node_lost, never at its call timeout; `kvrt worker`
// exits non-zero; the new node removes what the dead one left (descriptor,
// tokens and sockets, pool segments), starts its pools at the next pool
// generation, and refuses anything of the old node with a typed error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "services/common/process_identity.hpp"
#include "services/mapper/mapper_view.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

using Clock = std::chrono::steady_clock;

// Far beyond any detection delay the node's death may take: a call that ends
// by timing out fails the test by its error code, not by this bound.
constexpr std::chrono::milliseconds kCallTimeout{30000};

std::unique_ptr<Client> connect(const NodeDescriptor& node, const std::string& principal, bool channel) {
  ClientOptions o;
  o.worker_name = principal + (channel ? "-channel" : "-middleman");
  o.timeout = kCallTimeout;
  o.use_session_channel = channel;
  Result<std::unique_ptr<Client>> c = Client::connect(node, read_token_file(node.token_path(principal)).value(), o);
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  REQUIRE((*c)->on_session_channel() == channel);
  return std::move(*c);
}

Result<NamespaceGrantReceipt> authorize(Client& c) { return c.call(AuthorizeRequest{{}, "test/shared"}); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool segment_exists(const PoolAttachment& p) { return std::filesystem::exists("/dev/shm/" + p.segment_name); }

}  // namespace

TEST_CASE("a client learns of its node's death at its next call, on either transport", "[node][process][death]") {
  ScratchDir dir("death-next-call");
  NodeProcess node(dir);
  auto channel = connect(node.descriptor(), "worker-0", true);
  auto middleman = connect(node.descriptor(), "worker-1", false);
  REQUIRE(authorize(*channel).ok());
  REQUIRE(authorize(*middleman).ok());
  CHECK(node.kill() == 128 + SIGKILL);
  for (Client* c : {channel.get(), middleman.get()}) {
    const Clock::time_point t0 = Clock::now();
    Result<NamespaceGrantReceipt> r = authorize(*c);
    const double first = seconds_since(t0);
    REQUIRE_FALSE(r.ok());
    INFO(r.error().describe());
    CHECK(r.error().code == ErrorCode::node_lost);
    CHECK(first < 5.0);  // not the 30 s call timeout
    // Lost for good: every later call answers the same at once.
    const Clock::time_point t1 = Clock::now();
    Result<NamespaceGrantReceipt> again = authorize(*c);
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().code == ErrorCode::node_lost);
    CHECK(seconds_since(t1) < 1.0);
  }
}

// Seen in a chaos campaign: a worker whose node died while it fetched its
// pools' descriptors (a connection of its own) exited with rpc_failed.
TEST_CASE("a connection of the session's own after its node died answers node_lost", "[node][process][death]") {
  ScratchDir dir("death-side-connection");
  // Unnamed segments: a worker takes its pools' descriptors over a
  // connection of its own.
  NodeProcess node(dir, {}, test_node_config(dir, "pool_segments = \"unnamed\"\n"));
  auto channel = connect(node.descriptor(), "worker-0", true);
  Result<PoolDescriptors> before = channel->pool_descriptors();
  INFO((before.ok() ? std::string("ok") : before.error().describe()));
  REQUIRE(before.ok());
  CHECK(node.kill() == 128 + SIGKILL);
  Result<PoolDescriptors> pools = channel->pool_descriptors();
  REQUIRE_FALSE(pools.ok());
  INFO(pools.error().describe());
  CHECK(pools.error().code == ErrorCode::node_lost);
  // The session is lost for good: the next call answers the same.
  Result<NamespaceGrantReceipt> r = authorize(*channel);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::node_lost);
}

// Seen in the CI chaos campaign: an engine started in the moment between a
// node's death and its successor's descriptor read no descriptor, or found
// the dead node's page-pool socket with nobody listening, and exited with
// errors that did not say the node was gone.
TEST_CASE("no node serving a descriptor path, or its page-pool socket, is node_unreachable", "[node][process][death]") {
  ScratchDir dir("death-unreachable");
  const Result<NodeDescriptor> none = read_node_descriptor(dir.file("node.json"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::node_unreachable);
  // A path that exists but is no descriptor stays descriptor_invalid.
  std::filesystem::create_directory(dir.file("folder"));
  const Result<NodeDescriptor> folder = read_node_descriptor(dir.file("folder"));
  REQUIRE_FALSE(folder.ok());
  CHECK(folder.error().code == ErrorCode::descriptor_invalid);

  NodeProcess node(dir, {}, "config/node-virtual.toml");
  REQUIRE(node.descriptor().mapper.has_value());
  const MapperAttachment mapper = *node.descriptor().mapper;
  REQUIRE(MapperPoolView::attach(mapper).ok());
  CHECK(node.kill() == 128 + SIGKILL);
  REQUIRE(std::filesystem::exists(mapper.socket_path));  // a killed node removes nothing
  const Result<MapperPoolView> view = MapperPoolView::attach(mapper);
  REQUIRE_FALSE(view.ok());
  INFO(view.error().describe());
  CHECK(view.error().code == ErrorCode::node_unreachable);
}

TEST_CASE("a call blocked on a hung node ends with node_lost when the node dies", "[node][process][death]") {
  for (const bool use_channel : {true, false}) {
    INFO((use_channel ? "session channel" : "middleman"));
    ScratchDir dir("death-in-flight");
    NodeProcess node(dir);
    auto client = connect(node.descriptor(), "worker-0", use_channel);
    REQUIRE(authorize(*client).ok());
    // A stopped node takes the request and never answers: the call is in
    // flight when the node is killed.
    node.stop_and_wait();
    const Clock::time_point t0 = Clock::now();
    std::future<Result<NamespaceGrantReceipt>> pending =
        std::async(std::launch::async, [&] { return authorize(*client); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(pending.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
    node.kill();
    REQUIRE(pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    const Result<NamespaceGrantReceipt> r = pending.get();
    REQUIRE_FALSE(r.ok());
    INFO(r.error().describe());
    CHECK(r.error().code == ErrorCode::node_lost);
    CHECK(seconds_since(t0) < 5.0);
  }
}

TEST_CASE("a connect to a node that dies meanwhile fails at once with a typed error", "[node][process][death]") {
  ScratchDir dir("death-connect");
  NodeProcess node(dir);
  const NodeDescriptor d = node.descriptor();
  const std::string token = read_token_file(d.token_path("worker-0")).value();
  node.stop_and_wait();
  const Clock::time_point t0 = Clock::now();
  std::future<Result<std::unique_ptr<Client>>> connecting = std::async(std::launch::async, [&] {
    ClientOptions o;
    o.timeout = kCallTimeout;
    return Client::connect(d, token, o);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  node.kill();
  REQUIRE(connecting.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const Result<std::unique_ptr<Client>> c = connecting.get();
  REQUIRE_FALSE(c.ok());
  INFO(c.error().describe());
  CHECK((c.error().code == ErrorCode::node_unreachable || c.error().code == ErrorCode::node_lost));
  CHECK(seconds_since(t0) < 5.0);
}

// A listening socket whose accept queue is full: the kernel drops every SYN
// it gets and retries it for minutes, as it drops the one that reaches a
// killed node's socket while it closes. Backlog 0 admits one connection,
// which the filler takes.
struct FullListener {
  UniqueFd listener;
  UniqueFd filler;
  uint16_t port = 0;
  FullListener() {
    listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(listener);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener.get(), 0) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
    filler = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(::connect(filler.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  }
};

ProcessIdentity identity_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Result<ProcStat> stat = parse_proc_stat(text);
  REQUIRE(stat.ok());
  return ProcessIdentity{pid, stat->start_time_ticks};
}

TEST_CASE("a connect the kernel holds up ends when the node's process exits, or at the timeout",
          "[node][process][death]") {
  FullListener full;
  NodeDescriptor d;
  d.host = "127.0.0.1";
  d.port = full.port;
  ClientOptions o;
  o.worker_name = "held-up";

  SECTION("the process named by the descriptor exits") {
    const pid_t stand_in = ::fork();
    REQUIRE(stand_in >= 0);
    if (stand_in == 0) {
      ::pause();
      ::_exit(0);
    }
    const ProcessIdentity id = identity_of(stand_in);
    d.node_pid = static_cast<uint32_t>(id.pid);
    d.node_start_ticks = id.start_time_ticks;
    o.timeout = kCallTimeout;
    std::future<Result<std::unique_ptr<Client>>> connecting =
        std::async(std::launch::async, [&] { return Client::connect(d, "00", o); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(connecting.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
    const Clock::time_point killed = Clock::now();
    ::kill(stand_in, SIGKILL);
    ::waitpid(stand_in, nullptr, 0);
    // Without the liveness check this connect waits out the kernel's SYN
    // retries, about two minutes.
    REQUIRE(connecting.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    const Result<std::unique_ptr<Client>> c = connecting.get();
    REQUIRE_FALSE(c.ok());
    INFO(c.error().describe());
    CHECK(c.error().code == ErrorCode::node_unreachable);
    CHECK(c.error().describe().find("exited while this client was connecting") != std::string::npos);
    CHECK(seconds_since(killed) < 5.0);
  }
  SECTION("the node lives but accepts nothing") {
    const ProcessIdentity self = current_process_identity().value();
    d.node_pid = static_cast<uint32_t>(self.pid);
    d.node_start_ticks = self.start_time_ticks;
    o.timeout = std::chrono::milliseconds(300);
    const Clock::time_point t0 = Clock::now();
    const Result<std::unique_ptr<Client>> c = Client::connect(d, "00", o);
    REQUIRE_FALSE(c.ok());
    INFO(c.error().describe());
    CHECK(c.error().code == ErrorCode::node_unreachable);
    CHECK(c.error().describe().find("did not accept a connection in 300 ms") != std::string::npos);
    CHECK(seconds_since(t0) < 5.0);
  }
}

TEST_CASE("a hung node that stops answering heartbeats is lost to its clients", "[node][process][death]") {
  ScratchDir dir("death-hung");
  NodeProcess node(dir);
  auto client = connect(node.descriptor(), "worker-0", true);
  REQUIRE(authorize(*client).ok());
  node.stop_and_wait();
  const Clock::time_point t0 = Clock::now();
  const Result<NamespaceGrantReceipt> r = authorize(*client);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().describe());
  // The client's middleman connection times out after connection_timeout_ms
  // (2 s by default) without heartbeats; that fails the blocked call.
  CHECK(r.error().code == ErrorCode::node_lost);
  CHECK(seconds_since(t0) < 10.0);
  node.signal(SIGCONT);
}

TEST_CASE("kvrt worker exits non-zero soon after its node is killed", "[node][process][death]") {
  ScratchDir dir("death-worker");
  NodeProcess node(dir);
  KvrtProcess worker(
      {"worker", "--node", node.descriptor_path(), "--principal", "worker-0", "--duration", "60", "--json"},
      dir.file("worker.log"));
  await_stats(
      node, [](const NodeStats& x) { return x.value("node", "sessions_opened") == 1; }, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // mid-work
  node.kill();
  const Clock::time_point t0 = Clock::now();
  const int status = worker.wait(std::chrono::seconds(20));
  INFO(worker.output());
  CHECK(status != 0);
  CHECK(seconds_since(t0) < 5.0);
  CHECK(worker.output().find("node_lost") != std::string::npos);
}

TEST_CASE("a node restarted on a killed node's descriptor reclaims its files and refuses its receipts",
          "[node][process][death]") {
  ScratchDir dir("death-restart");
  NodeDescriptor old_node;
  std::unique_ptr<Client> old_client;
  AllocationReceipt held;
  {
    NodeProcess first(dir);
    old_node = first.descriptor();
    old_client = connect(old_node, "worker-0", true);
    Result<AllocatorBatchReceipt> a = old_client->call(AllocatorBatch{{}, {AllocateOp{20, {}, std::nullopt}}});
    REQUIRE(a.ok());
    REQUIRE(std::holds_alternative<AllocationReceipt>(a->outcomes.at(0)));
    held = std::get<AllocationReceipt>(a->outcomes[0]);
    CHECK(first.kill() == 128 + SIGKILL);
  }
  // What the killed node left behind.
  REQUIRE(std::filesystem::exists(dir.file("node.json")));
  REQUIRE(std::filesystem::exists(old_node.token_dir + "/session.sock"));
  const std::string old_token = read_token_file(old_node.token_path("worker-0")).value();
  REQUIRE_FALSE(old_node.pools.empty());
  for (const PoolAttachment& p : old_node.pools) REQUIRE(segment_exists(p));

  NodeProcess second(dir);
  const NodeDescriptor& d = second.descriptor();
  CHECK(d.instance != old_node.instance);
  for (const PoolAttachment& p : old_node.pools) CHECK_FALSE(segment_exists(p));
  REQUIRE(d.pools.size() == old_node.pools.size());
  for (size_t g = 0; g < d.pools.size(); ++g)
    CHECK(d.pools[g].generation.value == old_node.pools[g].generation.value + 1);
  INFO(second.log());
  CHECK(second.log().find("a dead node (pid " + std::to_string(old_node.node_pid) + ")") != std::string::npos);
  // The old token opens nothing on the new node; the old client stays lost.
  CHECK(read_token_file(d.token_path("worker-0")).value() != old_token);
  ClientOptions quick;
  quick.timeout = std::chrono::seconds(10);
  Result<std::unique_ptr<Client>> stale = Client::connect(d, old_token, quick);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::authorization_unauthenticated);
  Result<AllocatorBatchReceipt> lost = old_client->call(AllocatorBatch{{}, {ReadTableOp{held.request_id}}});
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.error().code == ErrorCode::node_lost);
  // The old node's request and blocks mean nothing here: refused, and the
  // node's state is unchanged.
  auto fresh = connect(d, "worker-0", true);
  const RequestFence fence{held.request_id, held.request_generation, held.table_version_after};
  Result<AllocatorBatchReceipt> refused =
      fresh->call(AllocatorBatch{{}, {ReleaseOp{fence, ReleaseReason::finished}, ReadTableOp{held.request_id}}});
  REQUIRE(refused.ok());
  for (const AllocatorOutcome& o : refused->outcomes) {
    REQUIRE(std::holds_alternative<Error>(o));
    INFO(std::get<Error>(o).describe());
    CHECK((std::get<Error>(o).code == ErrorCode::unknown_request || std::get<Error>(o).code == ErrorCode::not_owner));
  }
  fresh.reset();
  // The new node serves a worker exactly.
  KvrtProcess worker(
      {"worker", "--node", second.descriptor_path(), "--principal", "worker-1", "--duration", "1", "--json"},
      dir.file("worker.log"));
  INFO(worker.output());
  CHECK(worker.wait() == 0);
  require_quiescent(await_quiescent(second));
}

TEST_CASE("a node refuses a descriptor path that a live node serves", "[node][process][death]") {
  ScratchDir dir("death-in-use");
  NodeProcess node(dir);
  KvrtProcess second(NodeProcess::node_args("tests/data/node/node-test.toml", node.descriptor_path(), {}, {}),
                     dir.file("second.log"));
  const int status = second.wait(std::chrono::seconds(30));
  INFO(second.output());
  CHECK(status != 0);
  CHECK(second.output().find("descriptor_in_use") != std::string::npos);
  // The first node still serves, with its own descriptor and pools.
  CHECK(read_node_descriptor(node.descriptor_path()).value().node_pid == static_cast<uint32_t>(node.pid()));
  auto client = connect(node.descriptor(), "worker-0", true);
  CHECK(authorize(*client).ok());
}

}  // namespace kvrt::test
