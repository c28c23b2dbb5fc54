// [node][transport] Transport faults on honest traffic: a client's session
// channel through ChannelFaultProxy (tools/chaos/channel_fault_proxy.hpp),
// one fault of each kind on a live node. Checked against what the node's own
// statistics say happened (every owner validating at each read): a delayed
// frame changes nothing; a dropped request is never run and a dropped reply
// was, and either breaks the channel with rpc_timeout while the session goes
// on over the middleman; a duplicated request runs twice and the stray reply
// breaks the channel (rpc_failed); a connection cut mid-frame or between
// frames ends the session (session_ended: a live node's channel closed),
// never a crash or a hang; and
// whatever the session held goes back when it ends.
#include "tools/chaos/channel_fault_proxy.hpp"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/node/node_fixture.hpp"
#include "tests/node/node_prefix_helpers.hpp"

namespace kvrt::test {
namespace {

using chaos::ChannelFaultProxy;
using chaos::TransportFault;
using chaos::TransportFaultKind;

std::unique_ptr<Client> through(const InProcessNode& n, const ChannelFaultProxy& proxy) {
  ClientOptions o;
  o.channel_socket = proxy.path();
  o.timeout = std::chrono::milliseconds(400);
  Result<std::unique_ptr<Client>> c =
      Client::connect(n.descriptor, read_token_file(n.descriptor.token_path("worker-0")).value(), o);
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  return std::move(*c);
}

Result<AllocatorBatchReceipt> allocate(Client& c) {
  return c.call(AllocatorBatch{{}, {AllocateOp{20, {}, std::nullopt}}});
}

// The node has reclaimed every session: nothing is held.
void wait_for_no_requests(const InProcessNode& n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (n.stat("allocator", "live_requests") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(n.stat("allocator", "live_requests") == 0);
}

}  // namespace

TEST_CASE("transport faults on the session channel: each kind ends typed and the node stays exact",
          "[node][transport]") {
  ScratchDir dir("transport-faults");
  InProcessNode n(dir, test_node_config(dir, ""));
  const std::string socket = "/tmp/kvrt-proxy-test-" + std::to_string(::getpid()) + ".sock";
  Result<std::unique_ptr<ChannelFaultProxy>> started =
      ChannelFaultProxy::start(socket, n.descriptor.token_dir + "/session.sock");
  REQUIRE(started.ok());
  ChannelFaultProxy& proxy = **started;
  const int me = static_cast<int>(::getpid());

  SECTION("a delay below the call timeout changes nothing") {
    auto c = through(n, proxy);
    REQUIRE(c->on_session_channel());
    proxy.arm(me, TransportFault{TransportFaultKind::delay, 100});
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(allocate(*c).ok());
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(100));
    CHECK(c->on_session_channel());
    CHECK(n.stat("allocator", "live_requests") == 1);
  }
  SECTION("a dropped request is never run; the session goes on over the middleman") {
    auto c = through(n, proxy);
    proxy.arm(me, TransportFault{TransportFaultKind::drop_request, 0});
    Result<AllocatorBatchReceipt> lost = allocate(*c);
    REQUIRE_FALSE(lost.ok());
    CHECK(lost.error().code == ErrorCode::rpc_timeout);
    CHECK_FALSE(c->on_session_channel());
    CHECK(n.stat("allocator", "live_requests") == 0);
    REQUIRE(allocate(*c).ok());
    CHECK(n.stat("allocator", "live_requests") == 1);
  }
  SECTION("a dropped reply: the node ran it, the worker knows it failed") {
    auto c = through(n, proxy);
    proxy.arm(me, TransportFault{TransportFaultKind::drop_reply, 0});
    Result<AllocatorBatchReceipt> lost = allocate(*c);
    REQUIRE_FALSE(lost.ok());
    CHECK(lost.error().code == ErrorCode::rpc_timeout);
    CHECK(n.stat("allocator", "live_requests") == 1);
    REQUIRE(allocate(*c).ok());
    CHECK(n.stat("allocator", "live_requests") == 2);
  }
  SECTION("a duplicated request runs twice, and the stray reply breaks the channel") {
    auto c = through(n, proxy);
    proxy.arm(me, TransportFault{TransportFaultKind::duplicate, 0});
    REQUIRE(allocate(*c).ok());
    Result<AllocatorBatchReceipt> next = allocate(*c);
    REQUIRE_FALSE(next.ok());
    CHECK(next.error().code == ErrorCode::rpc_failed);
    CHECK_FALSE(c->on_session_channel());
    // Both copies of the first request and nothing of the second (its
    // frame was sent, so the node ran it too: three).
    CHECK(n.stat("allocator", "live_requests") == 3);
  }
  for (TransportFaultKind cut : {TransportFaultKind::truncate, TransportFaultKind::close}) {
    DYNAMIC_SECTION("a connection cut (" << to_string(cut) << ") ends the session") {
      auto c = through(n, proxy);
      REQUIRE(allocate(*c).ok());
      proxy.arm(me, TransportFault{cut, 0});
      Result<AllocatorBatchReceipt> lost = allocate(*c);
      REQUIRE_FALSE(lost.ok());
      // A live node's channel closed: to the client, the node ended the session.
      CHECK(lost.error().code == ErrorCode::session_ended);
      Result<AllocatorBatchReceipt> after = allocate(*c);
      REQUIRE_FALSE(after.ok());
      CHECK(after.error().code == ErrorCode::session_ended);  // the client does not carry on half-connected
      CHECK(n.stat("allocator", "live_requests") == 1);
    }
  }
  // Whatever the session held (duplicates, a reply it never saw) goes back
  // with it; the proxy did exactly the one fault.
  wait_for_no_requests(n);
  uint64_t applied = 0;
  for (uint64_t a : proxy.stats().applied) applied += a;
  CHECK(applied == 1);
}

}  // namespace kvrt::test
