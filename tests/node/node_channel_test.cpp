// The session channel (services/session/channel_frame.hpp): a
// worker's framed-bytes fast path to its session. The frame header's codec;
// a Client on the channel gets the same answers as one on the middleman;
// what a raw socket can send (garbage, frames before attach, wrong tickets,
// pipelines) gets a typed answer or a closed connection, never a crash, and
// the node keeps serving; a session's end closes its channels.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "node/node_config.hpp"
#include "schema/codecs.hpp"
#include "services/common/unix_socket_address.hpp"
#include "services/session/channel_frame.hpp"
#include "services/session/session_channel.hpp"
#include "tests/node/node_fixture.hpp"

namespace kvrt::test {
namespace {

// A raw connection to the node's channel socket, for what a Client never sends.
class RawChannel {
 public:
  explicit RawChannel(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof(a.sun_path));
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0);
  }
  ~RawChannel() { ::close(fd_); }

  void send_bytes(const std::vector<uint8_t>& bytes) const {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  void send_frame(RouteId route, uint64_t sequence, const std::vector<uint8_t>& payload) const {
    const ChannelHeaderBytes h = write_channel_header({static_cast<uint32_t>(payload.size()), route, sequence});
    std::vector<uint8_t> bytes(h.begin(), h.end());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    send_bytes(bytes);
  }
  // Binds the connection to the ticket's session; the node must accept it.
  void attach(const std::string& ticket) const {
    send_frame(kAttachRoute, 1, std::vector<uint8_t>(ticket.begin(), ticket.end()));
    auto reply = read_frame();
    REQUIRE(reply.has_value());
    CHECK(reply->first.sequence == 1);
    REQUIRE(reply->second.empty());  // accepted: no refusal text
  }
  // The next reply frame, or nullopt when the node closed the connection.
  std::optional<std::pair<ChannelFrameHeader, std::vector<uint8_t>>> read_frame() const {
    std::vector<uint8_t> header(kChannelHeaderBytes);
    if (!read_exact(header)) return std::nullopt;
    Result<ChannelFrameHeader> h = read_channel_header(header);
    REQUIRE(h.ok());
    std::vector<uint8_t> payload(h->payload_bytes);
    REQUIRE(read_exact(payload));
    return std::make_pair(*h, std::move(payload));
  }
  // Reads and discards until the node closes the connection; false when it
  // is still open after `limit`.
  bool drained_to_close(std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<uint8_t> sink(1 << 16);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t r = ::recv(fd_, sink.data(), sink.size(), 0);
      if (r <= 0) return true;
    }
    return false;
  }
  // True when the node closes the connection within `limit`.
  bool closed_by_node(std::chrono::milliseconds limit = std::chrono::seconds(10)) const {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    uint8_t b = 0;
    return ::recv(fd_, &b, 1, 0) == 0;
  }

 private:
  bool read_exact(std::vector<uint8_t>& out) const {
    size_t got = 0;
    while (got < out.size()) {
      pollfd p{fd_, POLLIN, 0};
      REQUIRE(::poll(&p, 1, 10000) == 1);
      const ssize_t r = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
};

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

Client& require_channel(Client& c) {
  REQUIRE_FALSE(c.session().channel_socket.empty());
  REQUIRE(c.session().channel_ticket.size() == 32);
  REQUIRE(c.on_session_channel());
  return c;
}

}  // namespace

TEST_CASE("channel frame headers round-trip and refuse what no client sends", "[channel][codec]") {
  const ChannelFrameHeader h{1234, ReuseRoute::id, 0x0102030405060708ull};
  const ChannelHeaderBytes bytes = write_channel_header(h);
  // Little endian, as documented: length, route, flags, sequence.
  CHECK(bytes[0] == 0xd2);
  CHECK(bytes[1] == 0x04);
  CHECK(bytes[4] == 6);
  CHECK(bytes[8] == 0x08);
  CHECK(bytes[15] == 0x01);
  Result<ChannelFrameHeader> back = read_channel_header(bytes);
  REQUIRE(back.ok());
  CHECK(*back == h);

  CHECK(read_channel_header(std::span<const uint8_t>(bytes.data(), 15)).error().code == ErrorCode::decode_failed);
  // A route nobody declared (routes.hpp): the first free id after the table's.
  uint16_t undeclared = 0;
  while (is_known_route(RouteId{undeclared})) ++undeclared;
  ChannelHeaderBytes route = bytes;
  route[4] = static_cast<uint8_t>(undeclared);
  route[5] = static_cast<uint8_t>(undeclared >> 8);
  CHECK(read_channel_header(route).error().field == "route");
  ChannelHeaderBytes flags = bytes;
  flags[7] = 1;
  CHECK(read_channel_header(flags).error().field == "flags");
  ChannelHeaderBytes big = write_channel_header({kChannelMaxPayloadBytes, kPingRoute, 1});
  CHECK(read_channel_header(big).ok());
  big[0] += 1;
  CHECK(read_channel_header(big).error().field == "payload_bytes");
}

TEST_CASE("a client on the session channel gets the middleman's answers", "[node][channel]") {
  ScratchDir dir("channel-same");
  InProcessNode n(dir);
  std::unique_ptr<Client> fast = n.connect("worker-0");
  require_channel(*fast);
  ClientOptions slow_options;
  slow_options.use_session_channel = false;
  Result<std::unique_ptr<Client>> slow_result =
      Client::connect(n.descriptor, read_token_file(n.descriptor.token_path("worker-1")).value(), slow_options);
  REQUIRE(slow_result.ok());
  Client& slow = **slow_result;
  CHECK_FALSE(slow.on_session_channel());
  CHECK(n.stat("node", "channels_attached") == 1);

  // The same batch through each transport: equal receipts but for the ids
  // and digests that name each session's own request.
  const AllocatorBatch batch{TraceContext{7, 1, 0},
                             {AllocateOp{20, {}, std::nullopt}, AllocateOp{0, {}, std::nullopt}}};
  Result<AllocatorBatchReceipt> a = fast->call(batch);
  Result<AllocatorBatchReceipt> b = slow.call(batch);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->outcomes.size() == 2);
  REQUIRE(b->outcomes.size() == 2);
  const auto& ra = std::get<AllocationReceipt>(a->outcomes[0]);
  const auto& rb = std::get<AllocationReceipt>(b->outcomes[0]);
  CHECK(ra.outcome == rb.outcome);
  CHECK(ra.useful_new_rows == rb.useful_new_rows);
  CHECK(ra.new_physical_blocks == rb.new_physical_blocks);
  CHECK(ra.request_id != rb.request_id);
  CHECK(std::get<Error>(a->outcomes[1]).code == std::get<Error>(b->outcomes[1]).code);

  // A session holds only its own: the fast session cannot release the slow one's request.
  const RequestFence foreign{rb.request_id, rb.request_generation, rb.table_version_after};
  Result<AllocatorBatchReceipt> refused = fast->call(AllocatorBatch{{}, {ReleaseOp{foreign, ReleaseReason::finished}}});
  REQUIRE(refused.ok());
  CHECK(std::get<Error>(refused->outcomes.at(0)).code == ErrorCode::not_owner);

  // Malformed payloads on the channel: the owner's typed error, as through the middleman.
  for (RouteId route : {AllocatorRoute::id, ReuseRoute::id, ExecutorRoute::id}) {
    Result<std::vector<uint8_t>> reply = fast->raw(route, {0xff, 0x00, 0x13});
    REQUIRE(reply.ok());
    Result<ErrorMessage> e = codec::decode<ErrorMessage>(*reply);
    REQUIRE(e.ok());
    CHECK(e->error.code == ErrorCode::decode_failed);
  }
  CHECK(fast->on_session_channel());
  // A reply larger than a socket buffer (200 receipts, about 66 KiB) arrives whole.
  Result<AllocatorBatchReceipt> many =
      fast->call(AllocatorBatch{{}, std::vector<AllocatorOp>(200, AllocatorOp{AllocateOp{16, {}, std::nullopt}})});
  REQUIRE(many.ok());
  CHECK(many->outcomes.size() == 200);
  CHECK(std::holds_alternative<AllocationReceipt>(many->outcomes.back()));
  // The attach route is the channel's own: refused before anything is sent.
  CHECK(fast->raw(kAttachRoute, bytes_of(fast->session().channel_ticket)).error().code == ErrorCode::invalid_argument);
  Result<std::vector<uint8_t>> echo = fast->raw(kPingRoute, bytes_of("ping"));
  REQUIRE(echo.ok());
  CHECK(*echo == bytes_of("ping"));
}

TEST_CASE("bad channel input closes only that connection and the node keeps serving", "[node][channel]") {
  ScratchDir dir("channel-bad");
  InProcessNode n(dir);
  std::unique_ptr<Client> client = n.connect("worker-0");
  const std::string path = require_channel(*client).session().channel_socket;

  SECTION("an unknown route") {
    RawChannel raw(path);
    ChannelHeaderBytes h = write_channel_header({0, kPingRoute, 1});
    h[4] = 200;
    raw.send_bytes(std::vector<uint8_t>(h.begin(), h.end()));
    CHECK(raw.closed_by_node());
  }
  SECTION("a frame above the size limit, refused before its payload") {
    RawChannel raw(path);
    ChannelHeaderBytes h = write_channel_header({kChannelMaxPayloadBytes, AllocatorRoute::id, 1});
    h[0] += 1;
    raw.send_bytes(std::vector<uint8_t>(h.begin(), h.end()));
    CHECK(raw.closed_by_node());
  }
  SECTION("a request before the attach frame") {
    RawChannel raw(path);
    raw.send_frame(AllocatorRoute::id, 5, codec::encode(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}}));
    auto reply = raw.read_frame();
    REQUIRE(reply.has_value());
    CHECK(reply->first.sequence == 5);
    CHECK(std::string(reply->second.begin(), reply->second.end()).find("before the attach or hello frame") != std::string::npos);
    CHECK(raw.closed_by_node());
  }
  SECTION("a wrong ticket") {
    RawChannel raw(path);
    raw.send_frame(kAttachRoute, 1, bytes_of("00000000000000000000000000000000"));
    auto reply = raw.read_frame();
    REQUIRE(reply.has_value());
    CHECK(std::string(reply->second.begin(), reply->second.end()) == "unknown or ended session ticket");
    CHECK(raw.closed_by_node());
    CHECK(n.stat("node", "channel_attaches_refused") == 1);
  }
  SECTION("a connection that stops in the middle of a frame") {
    {
      RawChannel raw(path);
      raw.attach(client->session().channel_ticket);
      const ChannelHeaderBytes h = write_channel_header({4096, AllocatorRoute::id, 2});
      std::vector<uint8_t> part(h.begin(), h.end());
      part.resize(part.size() + 100, 0xab);
      raw.send_bytes(part);
    }
  }
  // Whatever happened above, the node still serves its sessions.
  Result<AllocatorBatchReceipt> r = client->call(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}});
  REQUIRE(r.ok());
  CHECK(std::get<AllocationReceipt>(r->outcomes.at(0)).outcome == AllocationOutcome::committed);
  CHECK(client->on_session_channel());
}

TEST_CASE("pipelined channel frames are answered once each, in request order", "[node][channel]") {
  ScratchDir dir("channel-order");
  InProcessNode n(dir);
  std::unique_ptr<Client> client = n.connect("worker-0");
  RawChannel raw(require_channel(*client).session().channel_socket);
  raw.attach(client->session().channel_ticket);

  // A slow owner's request first, then fast ones: the replies still come in
  // the order asked, each under its own sequence number.
  raw.send_frame(AllocatorRoute::id, 10, codec::encode(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}}));
  raw.send_frame(kPingRoute, 11, bytes_of("a"));
  raw.send_frame(kAttachRoute, 12, bytes_of(client->session().channel_ticket));
  raw.send_frame(kPingRoute, 13, {});
  auto r10 = raw.read_frame(), r11 = raw.read_frame(), r12 = raw.read_frame(), r13 = raw.read_frame();
  REQUIRE((r10 && r11 && r12 && r13));
  CHECK(r10->first.sequence == 10);
  CHECK(r10->first.route == AllocatorRoute::id);
  Result<AllocatorBatchReceipt> receipt = codec::decode<AllocatorBatchReceipt>(r10->second);
  REQUIRE(receipt.ok());
  CHECK(std::holds_alternative<AllocationReceipt>(receipt->outcomes.at(0)));
  CHECK(r11->first.sequence == 11);
  CHECK(r11->second == bytes_of("a"));
  // A second attach on an attached channel: a typed refusal, the channel stays.
  CHECK(r12->first.sequence == 12);
  Result<ErrorMessage> again = codec::decode<ErrorMessage>(r12->second);
  REQUIRE(again.ok());
  CHECK(again->error.code == ErrorCode::invalid_argument);
  CHECK(r13->first.sequence == 13);
  CHECK(r13->second.empty());
  // The raw connection's allocation belongs to the client's session.
  CHECK(n.stat("allocator", "live_requests") >= 1);

  // A frame that arrives a few bytes at a time, and one larger than a single
  // read of the node (4 KiB), are each cut out whole.
  const ChannelHeaderBytes h = write_channel_header({3, kPingRoute, 14});
  std::vector<uint8_t> trickle(h.begin(), h.end());
  trickle.insert(trickle.end(), {'x', 'y', 'z'});
  for (size_t at = 0; at < trickle.size(); at += 5) {
    raw.send_bytes(std::vector<uint8_t>(trickle.begin() + at, trickle.begin() + std::min(at + 5, trickle.size())));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto r14 = raw.read_frame();
  REQUIRE(r14.has_value());
  CHECK(r14->first.sequence == 14);
  CHECK(r14->second == bytes_of("xyz"));
  std::vector<uint8_t> big(100000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  raw.send_frame(kPingRoute, 15, big);
  auto r15 = raw.read_frame();
  REQUIRE(r15.has_value());
  CHECK(r15->first.sequence == 15);
  CHECK(r15->second == big);
}

TEST_CASE("a session's end closes its channels and voids its ticket", "[node][channel]") {
  ScratchDir dir("channel-end");
  InProcessNode n(dir);
  std::unique_ptr<Client> client = n.connect("worker-0");
  const std::string path = require_channel(*client).session().channel_socket;
  const std::string ticket = client->session().channel_ticket;
  RawChannel raw(path);
  raw.attach(ticket);

  client.reset();  // the worker closes its session
  CHECK(raw.closed_by_node());
  RawChannel late(path);
  late.send_frame(kAttachRoute, 1, bytes_of(ticket));
  auto reply = late.read_frame();
  REQUIRE(reply.has_value());
  CHECK(std::string(reply->second.begin(), reply->second.end()) == "unknown or ended session ticket");
  CHECK(late.closed_by_node());
}

TEST_CASE("node config: the scheduler and the session channel are checked options", "[node][channel][config]") {
  const std::string head = "[node]\nlayout = \"x.toml\"\nblocks_per_group = 8\n";
  Result<NodeConfig> plain = parse_node_config(head, "plain.toml");
  REQUIRE(plain.ok());
  CHECK(plain->scheduler == NodeScheduler::sharing);
  CHECK(plain->session_channel);
  Result<NodeConfig> polling = parse_node_config(
      head + "scheduler = \"polling\"\nscheduler_poll_attempts = 5000\nsession_channel = false\n", "polling.toml");
  REQUIRE(polling.ok());
  CHECK(polling->scheduler == NodeScheduler::polling);
  CHECK(polling->scheduler_poll_attempts == 5000);
  CHECK_FALSE(polling->session_channel);
  Result<NodeConfig> bad = parse_node_config(head + "scheduler = \"spinning\"\n", "bad.toml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().reason.find("scheduler") != std::string::npos);
  CHECK(bad.error().reason.find("\"sharing\", \"polling\"") != std::string::npos);  // names what it accepts
  Result<NodeConfig> zero = parse_node_config(head + "scheduler_poll_attempts = 0\n", "bad.toml");
  REQUIRE_FALSE(zero.ok());
  Result<NodeConfig> typed = parse_node_config(head + "session_channel = \"yes\"\n", "bad.toml");
  REQUIRE_FALSE(typed.ok());
  CHECK(typed.error().reason.find("session_channel") != std::string::npos);
  // Fault injection is off unless asked for, and a boolean.
  CHECK_FALSE(plain->fault_injection);
  Result<NodeConfig> faults = parse_node_config(head + "fault_injection = true\n", "faults.toml");
  REQUIRE(faults.ok());
  CHECK(faults->fault_injection);
  Result<NodeConfig> faults_typed = parse_node_config(head + "fault_injection = 1\n", "bad.toml");
  REQUIRE_FALSE(faults_typed.ok());
  CHECK(faults_typed.error().reason.find("fault_injection") != std::string::npos);
  // Zero-on-recycle likewise.
  CHECK_FALSE(plain->zero_on_recycle);
  CHECK(parse_node_config(head + "zero_on_recycle = true\n", "zero.toml")->zero_on_recycle);
  CHECK_FALSE(parse_node_config(head + "zero_on_recycle = \"on\"\n", "bad.toml").ok());
}

TEST_CASE("a node without a session channel serves every call through the middleman", "[node][channel]") {
  ScratchDir dir("channel-off");
  test_node_config(dir, "session_channel = false\nscheduler = \"polling\"\nscheduler_threads = 1\n",
                   {"scheduler_threads"});
  InProcessNode n(dir, dir.file("node.toml"));
  std::unique_ptr<Client> client = n.connect("worker-0");
  CHECK(client->session().channel_socket.empty());
  CHECK(client->session().channel_ticket.empty());
  CHECK_FALSE(client->on_session_channel());
  Result<AllocatorBatchReceipt> r = client->call(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}});
  REQUIRE(r.ok());
  CHECK(std::get<AllocationReceipt>(r->outcomes.at(0)).outcome == AllocationOutcome::committed);
  CHECK(n.stat("node", "channels_attached") == 0);
}

TEST_CASE("the node serves at most 256 channel connections and keeps serving", "[node][channel]") {
  ScratchDir dir("channel-cap");
  InProcessNode n(dir);
  std::unique_ptr<Client> client = n.connect("worker-0");  // holds the first connection
  const std::string path = require_channel(*client).session().channel_socket;
  std::vector<std::unique_ptr<RawChannel>> idle;
  for (int i = 0; i < 255; ++i) idle.push_back(std::make_unique<RawChannel>(path));
  // One more is closed as it arrives: no thread is started for it.
  RawChannel over(path);
  CHECK(over.closed_by_node());
  // The connections already open are served: the client's, and a raw one that attaches.
  Result<std::vector<uint8_t>> echo = client->raw(kPingRoute, bytes_of("still here"));
  REQUIRE(echo.ok());
  CHECK(*echo == bytes_of("still here"));
  idle.front()->attach(client->session().channel_ticket);
  // Once some close, new connections are served again.
  idle.resize(100);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::unique_ptr<Client> later = n.connect("worker-1");
  CHECK(later->on_session_channel());
}

TEST_CASE("a worker that sends without reading loses its channel, and the node keeps serving", "[node][channel]") {
  ScratchDir dir("channel-stall");
  InProcessNode n(dir);
  std::unique_ptr<Client> client = n.connect("worker-0");
  RawChannel raw(require_channel(*client).session().channel_socket);
  raw.attach(client->session().channel_ticket);
  // 40 echoes of 100 kB, none read: their answers outgrow the socket buffer,
  // the writer gives up after its stall limit and shuts the connection down.
  const std::vector<uint8_t> big(100000, 0x5a);
  for (uint64_t k = 0; k < 40; ++k) raw.send_frame(kPingRoute, 100 + k, big);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(raw.drained_to_close(std::chrono::seconds(10)));
  // Meanwhile and afterwards the node serves the session's own client.
  Result<AllocatorBatchReceipt> r = client->call(AllocatorBatch{{}, {AllocateOp{16, {}, std::nullopt}}});
  REQUIRE(r.ok());
  CHECK(std::holds_alternative<AllocationReceipt>(r->outcomes.at(0)));
  CHECK(client->on_session_channel());
}

TEST_CASE("socket paths that do not fit a socket address are refused by name", "[channel][config]") {
  CHECK(unix_socket_address(std::string(107, 'a'), "channel_socket").ok());
  const Result<sockaddr_un> over = unix_socket_address(std::string(108, 'a'), "channel_socket");
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == ErrorCode::invalid_argument);
  CHECK(over.error().field == "channel_socket");
  CHECK_FALSE(unix_socket_address("", "socket_path").ok());
  // A client given such a path fails before any system call, with the same error.
  Result<std::unique_ptr<SessionChannel>> c =
      SessionChannel::attach(std::string(200, 'b'), "0123", std::chrono::milliseconds(100));
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().field == "channel_socket");
  // A path that fits but names no socket: the node is unreachable.
  Result<std::unique_ptr<SessionChannel>> none =
      SessionChannel::attach("/tmp/kvrt-no-such-channel.sock", "0123", std::chrono::milliseconds(100));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::node_unreachable);
}

}  // namespace kvrt::test
