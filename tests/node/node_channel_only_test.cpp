// [node][channel] Sessions opened on the session channel alone
// (ClientOptions::channel_only, kHelloRoute): the hello, every call and the
// pings travel over the node's Unix socket and the client never connects
// the middleman. The connection that carried the hello is the session's
// lifeline: closing it releases what the session holds; a session none of
// whose connections carried a frame for the node's connection timeout is
// reclaimed as a worker lost; a dead node is noticed by the next call or
// ping, not at a call timeout. A hello with a bad token or bad bytes is
// refused with a typed error and the node keeps serving.
#include <csignal>

#include "node/node_config.hpp"
#include "schema/codecs.hpp"
#include "services/session/session_channel.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

using Clock = std::chrono::steady_clock;

ClientOptions channel_only_options(const std::string& name) {
  ClientOptions o;
  o.worker_name = name;
  o.channel_only = true;
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

std::string token_of(const NodeDescriptor& d, const std::string& principal) {
  return read_token_file(d.token_path(principal)).value();
}

// Polls an in-process node's statistic until it equals `want` or 10 s pass.
int64_t await_stat(const InProcessNode& n, const std::string& owner, const std::string& name, int64_t want) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int64_t v = n.stat(owner, name);
  while (v != want && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    v = n.stat(owner, name);
  }
  return v;
}

// One call over a raw SessionChannel, decoded as the route's receipt.
template <class Request>
Result<receipt_of<Request>> channel_call(SessionChannel& channel, const Request& request) {
  Result<std::vector<uint8_t>> reply =
      channel.call(route_of<Request>::id, codec::encode(request), std::chrono::milliseconds(10000));
  if (!reply.ok()) return reply.error();
  return decode_reply<receipt_of<Request>>(*reply);
}

}  // namespace

TEST_CASE("a channel-only session is served without the middleman and released when it closes", "[node][channel]") {
  ScratchDir dir("channel-only");
  InProcessNode n(dir);
  REQUIRE_FALSE(n.descriptor.channel_socket.empty());
  CHECK(n.descriptor.channel_socket.starts_with('/'));  // found from any working directory
  Result<std::unique_ptr<Client>> connected =
      Client::connect(n.descriptor, token_of(n.descriptor, "worker-0"), channel_only_options("only"));
  INFO((connected.ok() ? std::string("ok") : connected.error().describe()));
  REQUIRE(connected.ok());
  Client& c = **connected;
  CHECK(c.on_session_channel());
  CHECK(c.session().principal == "worker-0");
  CHECK(n.stat("node", "sessions_opened_on_channel") == 1);
  CHECK(n.stat("node", "workers_connected") == 1);

  REQUIRE(c.call(AuthorizeRequest{{}, "test/shared"}).ok());
  Result<AllocatorBatchReceipt> held = c.call(AllocatorBatch{{}, {AllocateOp{40, {}, std::nullopt}}});
  REQUIRE(held.ok());
  REQUIRE(std::get<AllocationReceipt>(held->outcomes.at(0)).outcome == AllocationOutcome::committed);
  CHECK(n.stat("allocator", "live_requests") == 1);
  // Alive past the node's connection timeout (2.5 s in the test config): the
  // client's pings keep the session.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  CHECK(n.stat("node", "workers_connected") == 1);
  Result<AllocatorBatchReceipt> again = c.call(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}});
  REQUIRE(again.ok());
  CHECK(std::get<AllocationReceipt>(again->outcomes.at(0)).outcome == AllocationOutcome::committed);

  connected->reset();  // the lifeline closes: a closed session, not a lost one
  CHECK(await_stat(n, "node", "workers_connected", 0) == 0);
  CHECK(await_stat(n, "allocator", "live_requests", 0) == 0);
  CHECK(n.stat("node", "sessions_lost") == 0);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
  CHECK(n.stat("allocator", "refcount_delta") == 0);
}

TEST_CASE("a hello on the session channel with a bad token or bad bytes is refused with a typed error",
          "[node][channel]") {
  ScratchDir dir("channel-only-refused");
  InProcessNode n(dir);
  const std::string socket = n.descriptor.channel_socket;

  SECTION("a token no principal has") {
    Result<std::unique_ptr<Client>> c =
        Client::connect(n.descriptor, std::string(32, 'a'), channel_only_options("forged"));
    REQUIRE_FALSE(c.ok());
    INFO(c.error().describe());
    CHECK(c.error().code == ErrorCode::authorization_unauthenticated);
    CHECK(n.stat("node", "hellos_refused") == 1);
  }
  SECTION("bytes that are no HelloRequest") {
    Result<SessionChannel::Opened> opened =
        SessionChannel::open_session(socket, std::vector<uint8_t>{0xff, 0x00, 0x13}, std::chrono::milliseconds(10000));
    REQUIRE(opened.ok());
    Result<SessionReceipt> receipt = decode_reply<SessionReceipt>(opened->reply);
    REQUIRE_FALSE(receipt.ok());
    CHECK(receipt.error().code == ErrorCode::decode_failed);
    CHECK(n.stat("node", "hellos_refused") == 1);
  }
  SECTION("a second hello on a connection that already opened a session") {
    Result<SessionChannel::Opened> opened = SessionChannel::open_session(
        socket, codec::encode(HelloRequest{token_of(n.descriptor, "worker-0"), "twice", 1}),
        std::chrono::milliseconds(10000));
    REQUIRE(opened.ok());
    REQUIRE(decode_reply<SessionReceipt>(opened->reply).ok());
    // A bound connection passes a hello frame on to its session, which
    // answers a route that leads to no owner with a typed error.
    Result<std::vector<uint8_t>> second =
        opened->channel->call(kHelloRoute, codec::encode(HelloRequest{token_of(n.descriptor, "worker-1"), "again", 1}),
                              std::chrono::milliseconds(10000));
    REQUIRE(second.ok());
    Result<ErrorMessage> e = codec::decode<ErrorMessage>(*second);
    REQUIRE(e.ok());
    CHECK(e->error.code == ErrorCode::invalid_argument);
    CHECK(n.stat("node", "sessions_opened_on_channel") == 1);
  }
  // Whatever was refused above, the node still opens sessions.
  Result<std::unique_ptr<Client>> good =
      Client::connect(n.descriptor, token_of(n.descriptor, "worker-1"), channel_only_options("good"));
  REQUIRE(good.ok());
  CHECK((*good)->call(AuthorizeRequest{{}, "test/shared"}).ok());
}

TEST_CASE("a channel session whose connections go silent is reclaimed as a worker lost", "[node][channel]") {
  ScratchDir dir("channel-only-silent");
  InProcessNode n(dir);
  // A client that opens its session and then sends nothing: no pings, as a
  // stopped process would.
  Result<SessionChannel::Opened> opened = SessionChannel::open_session(
      n.descriptor.channel_socket, codec::encode(HelloRequest{token_of(n.descriptor, "worker-0"), "silent", 1}),
      std::chrono::milliseconds(10000));
  REQUIRE(opened.ok());
  REQUIRE(decode_reply<SessionReceipt>(opened->reply).ok());
  SessionChannel& channel = *opened->channel;
  REQUIRE(channel_call(channel, AuthorizeRequest{{}, "test/shared"}).ok());
  Result<AllocatorBatchReceipt> held = channel_call(channel, AllocatorBatch{{}, {AllocateOp{40, {}, std::nullopt}}});
  REQUIRE(held.ok());
  REQUIRE(std::get<AllocationReceipt>(held->outcomes.at(0)).outcome == AllocationOutcome::committed);
  const Clock::time_point t0 = Clock::now();
  CHECK(n.stat("node", "workers_connected") == 1);
  CHECK(await_stat(n, "node", "sessions_lost", 1) == 1);
  // Not before the node's connection timeout (2.5 s in the test config).
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() > 2.0);
  CHECK(n.stat("node", "workers_connected") == 0);
  CHECK(n.stat("node", "sessions_silenced") == 1);  // its heartbeats stopped
  CHECK(await_stat(n, "allocator", "live_requests", 0) == 0);
  CHECK(n.stat("allocator", "requests_reclaimed") == 1);
  CHECK(n.stat("allocator", "leaked_blocks") == 0);
  // The connection is closed: the next call fails and names no timeout.
  Result<std::vector<uint8_t>> after =
      channel.call(kPingRoute, std::vector<uint8_t>{1}, std::chrono::milliseconds(10000));
  REQUIRE_FALSE(after.ok());
  CHECK(after.error().code != ErrorCode::rpc_timeout);
}

TEST_CASE("channel_only needs a node that offers the session channel", "[node][channel]") {
  ScratchDir dir("channel-only-none");
  InProcessNode n(dir, test_node_config(dir, "session_channel = false\n"));
  CHECK(n.descriptor.channel_socket.empty());
  Result<std::unique_ptr<Client>> c =
      Client::connect(n.descriptor, token_of(n.descriptor, "worker-0"), channel_only_options("none"));
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == ErrorCode::invalid_argument);
  CHECK(c.error().field == "channel_only");
}

TEST_CASE("kvrt worker --channel-only: exact, reclaimed when stopped, and quick to see its node die",
          "[node][process][channel]") {
  ScratchDir dir("channel-only-process");
  NodeProcess node(dir);
  {
    KvrtProcess w({"worker", "--node", node.descriptor_path(), "--principal", "worker-0", "--requests", "60",
                   "--channel-only", "--json"},
                  dir.file("exact.log"));
    REQUIRE(w.wait(std::chrono::seconds(60)) == 0);
    INFO(w.output());
    CHECK(w.output().find("\"reuse_mismatches\":0") != std::string::npos);
    CHECK(w.output().find("\"requests\":60") != std::string::npos);
  }
  NodeStats s = await_quiescent(node);
  CHECK(s.value("node", "sessions_opened_on_channel") == 1);
  CHECK(s.value("node", "sessions_lost") == 0);
  require_quiescent(s);

  // Stopped while it holds requests: the node's liveness watch ends it.
  KvrtProcess hung({"worker", "--node", node.descriptor_path(), "--principal", "worker-1", "--duration", "60",
                    "--channel-only", "--json"},
                   dir.file("hung.log"));
  int64_t held = 0;
  for (int attempt = 0; attempt < 50 && held == 0; ++attempt) {
    await_stats(node, [](const NodeStats& x) { return x.value("allocator", "live_requests") > 0; });
    hung.signal(SIGSTOP);
    held = node.stats().value("allocator", "live_requests").value_or(0);
    if (held == 0) hung.signal(SIGCONT);
  }
  REQUIRE(held > 0);
  s = await_quiescent(node, std::chrono::seconds(15));
  require_quiescent(s);
  CHECK(s.value("node", "sessions_lost") == 1);
  CHECK(s.value("allocator", "requests_reclaimed") == held);
  hung.signal(SIGKILL);
  hung.wait();

  // The node killed mid-work: the worker's next call or ping fails at once.
  KvrtProcess w({"worker", "--node", node.descriptor_path(), "--principal", "worker-2", "--duration", "60",
                 "--channel-only", "--json"},
                dir.file("death.log"));
  await_stats(
      node, [](const NodeStats& x) { return x.value("node", "workers_connected") == 1; }, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  node.kill();
  const Clock::time_point t0 = Clock::now();
  const int status = w.wait(std::chrono::seconds(20));
  INFO(w.output());
  CHECK(status == 1);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 5.0);
  CHECK(w.output().find("node_lost") != std::string::npos);
}

}  // namespace kvrt::test
