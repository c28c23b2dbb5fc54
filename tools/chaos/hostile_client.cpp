#include "tools/chaos/hostile_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "actors/client.hpp"
#include "schema/codecs.hpp"
#include "services/common/splitmix64.hpp"
#include "services/session/channel_frame.hpp"

namespace kvrt::chaos {
namespace {

using Clock = std::chrono::steady_clock;

class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_{seed} {}
  uint64_t u64() { return rng_.next(); }
  uint32_t below(uint32_t n) { return n == 0 ? 0 : static_cast<uint32_t>(rng_.next() % n); }
  bool one_in(uint32_t n) { return below(n) == 0; }
  // Small numbers mostly (ids that may name something live), sometimes huge.
  uint64_t id() { return one_in(8) ? u64() : below(64); }
  uint32_t count() { return one_in(8) ? static_cast<uint32_t>(u64()) : below(600); }
  std::string namespace_name() {
    switch (below(4)) {
      case 0:
        return "local/default";
      case 1:
        return "";
      case 2:
        return "local/other";
      default:
        return std::string(below(300), static_cast<char>('a' + below(26)));
    }
  }
  std::vector<TokenId> tokens() {
    std::vector<TokenId> t(one_in(16) ? 5000 : below(200));
    for (TokenId& x : t) x = one_in(4) ? static_cast<TokenId>(u64()) : static_cast<TokenId>(below(64));
    return t;
  }
  PhysicalBlockHandle handle() {
    return {PoolId{below(4)}, CacheGroupId{below(3)}, PhysicalBlockId{static_cast<uint32_t>(id())},
            BlockGeneration{below(4)}};
  }
  RequestFence fence() { return {RequestId{id()}, RequestGeneration{below(3)}, TableVersion{id()}}; }
  TraceContext trace() { return {u64(), u64(), 0}; }
  // `stem` and a number below n ("m0", "m1", ...); built with += (GCC 12's
  // -Wrestrict misreads literal + string).
  std::string name(const char* stem, uint32_t n) {
    std::string out = stem;
    out += std::to_string(below(n));
    return out;
  }

 private:
  SplitMix64 rng_;
};

AllocatorBatch random_allocator(Draw& d) {
  AllocatorBatch b{d.trace(), {}};
  for (uint32_t k = 0, n = 1 + d.below(4); k < n; ++k) {
    switch (d.below(9)) {
      case 0:
        b.ops.push_back(AllocateOp{d.count(), {}, std::nullopt});
        break;
      case 1:
        b.ops.push_back(AllocateOp{d.count(), {d.handle(), d.handle()}, Epoch{d.id()}});
        break;
      case 2:
        b.ops.push_back(AppendOp{d.fence(), {}, std::nullopt});
        break;
      case 3:
        b.ops.push_back(CommitRowsOp{d.fence(), d.count()});
        break;
      case 4:
        b.ops.push_back(ForkOp{d.fence()});
        break;
      case 5:
        b.ops.push_back(TruncateOp{d.fence(), d.count(), d.count()});
        break;
      case 6:
        b.ops.push_back(ReleaseOp{d.fence(), ReleaseReason::finished});
        break;
      case 7:
        b.ops.push_back(AcquireLeaseOp{d.handle()});
        break;
      default:
        b.ops.push_back(ReleaseLeaseOp{LeaseId{d.id()}});
        break;
    }
  }
  return b;
}

PrefixBatch random_prefix(Draw& d) {
  PrefixBatch b{d.trace(), {}};
  if (d.one_in(2))
    b.ops.push_back(PrefixMatchOp{d.namespace_name(), RequestId{d.id()}, RequestGeneration{d.below(3)}, d.tokens(),
                                  d.one_in(2) ? LogitsPath::no_logits : LogitsPath::logits_required});
  else
    b.ops.push_back(PrefixPublishOp{d.namespace_name(), RequestId{d.id()}, d.tokens(), d.count(), d.count()});
  return b;
}

MapperBatch random_mapper(Draw& d) {
  MapperBatch b{d.trace(), {}};
  switch (d.below(4)) {
    case 0:
      b.ops.push_back(MapperAllocOp{RequestId{d.id()}, RequestGeneration{d.below(3)}, d.count()});
      break;
    case 1:
      b.ops.push_back(MapperStepOp{{StepRequest{RequestId{d.id()}, d.count()}}, MappingPath::synchronous});
      break;
    case 2:
      b.ops.push_back(MapperAppendOp{RequestId{d.id()}, SlotGeneration{d.id()}, d.count()});
      break;
    default:
      b.ops.push_back(MapperFreeOp{RequestId{d.id()}, SlotGeneration{d.id()}, ReleaseMode::retain});
      break;
  }
  return b;
}

ExecuteBatch random_executor(Draw& d) {
  ExecuteBatch b{d.trace(), {}};
  DecodeAttentionOp op{RequestId{d.id()}, TableVersion{d.id()}, d.below(8), d.below(64), {}};
  op.queries.resize(d.one_in(8) ? 100000 : d.below(512));
  for (float& q : op.queries) q = static_cast<float>(d.below(2000)) / 100.0f - 10.0f;
  b.ops.push_back(std::move(op));
  return b;
}

ReuseBatch random_reuse(Draw& d) {
  ReuseBatch b{d.trace(), {}};
  if (d.one_in(2))
    b.ops.emplace_back(std::in_place_type<ReuseAcquireOp>,
                       ReuseAcquireOp{d.namespace_name(), RequestId{d.id()}, RequestGeneration{d.below(3)}, d.tokens(),
                                      LogitsPath::logits_required, d.one_in(2)});
  else
    b.ops.emplace_back(std::in_place_type<ReuseReleaseOp>,
                       ReuseReleaseOp{ExecutionSnapshotVersion{d.id()}, d.one_in(2)});
  return b;
}

// A prompt schema's TOML: mostly well formed with random ranges (which may
// overlap, be empty or run past 2^32), sometimes cut or junk.
std::string random_schema_toml(Draw& d) {
  std::string t = "schema_id = \"s";
  t += std::to_string(d.below(3));
  t += "\"\ngeneration = ";
  t += std::to_string(d.one_in(8) ? d.u64() : d.below(4));
  t += "\n";
  for (uint32_t m = 0, n = d.below(4); m < n; ++m) {
    const uint64_t begin = d.one_in(8) ? d.u64() : d.below(300);
    t += "[[module]]\nid = \"m";
    t += std::to_string(d.below(3));
    t += "\"\npositions = [";
    t += std::to_string(begin);
    t += ", ";
    t += std::to_string(begin + d.below(100));
    t += "]\n";
    if (d.one_in(2)) t += "parameters = [\"p\"]\n";
  }
  if (d.one_in(6)) t.resize(d.below(static_cast<uint32_t>(t.size() + 1)));
  return t;
}

std::vector<PromptParameter> random_parameters(Draw& d) {
  std::vector<PromptParameter> p;
  for (uint32_t k = 0, n = d.below(3); k < n; ++k)
    p.push_back(PromptParameter{d.one_in(3) ? "q" : "p", std::to_string(d.below(4))});
  return p;
}

PromptAssembleRequest random_prompt(Draw& d) {
  PromptAssembleRequest r{d.trace(), d.namespace_name(), d.name("s", 3), d.below(4), {}};
  for (uint32_t k = 0, n = d.one_in(16) ? 200 : d.below(5); k < n; ++k)
    r.items.push_back(PromptItemSpec{d.one_in(3) ? "" : d.name("m", 3), random_parameters(d), d.tokens(),
                                     static_cast<uint32_t>(d.one_in(8) ? d.u64() : d.below(400)), d.one_in(4)});
  return r;
}

PromptModulePublishRequest random_publication(Draw& d) {
  return PromptModulePublishRequest{d.trace(),      d.namespace_name(),   d.name("s", 3), d.below(4),
                                    d.name("m", 3), random_parameters(d), d.tokens(),     RequestId{d.id()}};
}

SessionSaveRequest random_save(Draw& d) {
  SessionSaveRequest r{d.trace(), d.namespace_name(),          d.one_in(4) ? "" : d.name("c", 3), d.tokens(), {},
                       {},        d.one_in(4) ? "sliding" : ""};
  for (uint32_t g = 0, n = d.below(3); g < n; ++g) r.group_rows.emplace_back(d.below(4096), uint8_t{7});
  return r;
}

// One request of the route, from random fields.
std::vector<uint8_t> random_request(RouteId route, Draw& d) {
  if (route == AllocatorRoute::id) return codec::encode(random_allocator(d));
  if (route == PrefixRoute::id) return codec::encode(random_prefix(d));
  if (route == AuthorizeRoute::id) return codec::encode(AuthorizeRequest{d.trace(), d.namespace_name()});
  if (route == MapperRoute::id) return codec::encode(random_mapper(d));
  if (route == ExecutorRoute::id) return codec::encode(random_executor(d));
  if (route == ReuseRoute::id) return codec::encode(random_reuse(d));
  if (route == PromptSchemaRoute::id)
    return codec::encode(PromptSchemaRequest{d.trace(), d.namespace_name(), random_schema_toml(d)});
  if (route == PromptAssembleRoute::id) return codec::encode(random_prompt(d));
  if (route == PromptPublishRoute::id) return codec::encode(random_publication(d));
  if (route == SessionSaveRoute::id) return codec::encode(random_save(d));
  if (route == SessionResumeRoute::id)
    return codec::encode(SessionResumeRequest{d.trace(), d.namespace_name(), d.name("c", 3), d.tokens(), {}, ""});
  if (route == FaultArmRoute::id)  // an admin route: a worker session is refused
    return codec::encode(FaultArmRequest{d.trace(), true, {{"allocator.after_reserve_group_0", 1}}});
  std::vector<uint8_t> bytes(d.below(64));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(d.u64());
  return bytes;
}

// Bits flipped, bytes overwritten, cut short, lengthened, a span repeated,
// or all random: what a broken or malicious peer sends.
void mutate(std::vector<uint8_t>& bytes, Draw& d) {
  const uint32_t edits = 1 + d.below(4);
  for (uint32_t e = 0; e < edits; ++e) {
    const size_t n = bytes.size();
    switch (d.below(6)) {
      case 0:
        if (n > 0) bytes[d.below(static_cast<uint32_t>(n))] ^= static_cast<uint8_t>(1u << d.below(8));
        break;
      case 1:
        if (n > 0) bytes[d.below(static_cast<uint32_t>(n))] = static_cast<uint8_t>(d.one_in(2) ? 0xff : d.u64());
        break;
      case 2:
        bytes.resize(d.below(static_cast<uint32_t>(n + 1)));
        break;
      case 3:
        for (uint32_t k = 0, m = 1 + d.below(64); k < m; ++k) bytes.push_back(static_cast<uint8_t>(d.u64()));
        break;
      case 4:
        if (n > 8) {
          const size_t from = d.below(static_cast<uint32_t>(n - 8));
          const size_t len = 1 + d.below(static_cast<uint32_t>(std::min<size_t>(n - from, 64)));
          bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(d.below(static_cast<uint32_t>(n))),
                       bytes.begin() + static_cast<std::ptrdiff_t>(from),
                       bytes.begin() + static_cast<std::ptrdiff_t>(from + len));
        }
        break;
      default:
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(d.u64());
        break;
    }
  }
}

// The reply is the route's receipt, or an ErrorMessage; ping echoes.
bool decodes_as_answer(RouteId route, const std::vector<uint8_t>& sent, const std::vector<uint8_t>& reply,
                       bool* receipt) {
  *receipt = false;
  if (route == kPingRoute) return *receipt = reply == sent;
  with_route(route, [&]<class R>() { *receipt = codec::decode<typename R::Receipt>(reply).ok(); });
  return *receipt || codec::decode<ErrorMessage>(reply).ok();
}

// A connection to the node's channel socket that frames what a Client never would.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (fd_ < 0 || path.size() >= sizeof(a.sun_path)) return;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool open() const { return fd_ >= 0; }
  bool send_bytes(const std::vector<uint8_t>& bytes) const {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  static std::vector<uint8_t> frame(RouteId route, uint64_t sequence, const std::vector<uint8_t>& payload) {
    const ChannelHeaderBytes h = write_channel_header({static_cast<uint32_t>(payload.size()), route, sequence});
    std::vector<uint8_t> bytes(h.size() + payload.size());
    std::memcpy(bytes.data(), h.data(), h.size());
    if (!payload.empty()) std::memcpy(bytes.data() + h.size(), payload.data(), payload.size());
    return bytes;
  }
  // Binds the connection to the ticket's session: empty when the node
  // accepted it (an empty answer), else what went wrong (its refusal text).
  std::string attach(const std::string& ticket) const {
    const auto sent = Clock::now();
    if (!send_bytes(frame(kAttachRoute, 1, std::vector<uint8_t>(ticket.begin(), ticket.end()))))
      return "the attach frame could not be sent";
    std::vector<uint8_t> header(kChannelHeaderBytes);
    if (!read_exact(header))
      return "no answer to the attach frame after " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent).count()) + " ms";
    Result<ChannelFrameHeader> h = read_channel_header(header);
    if (!h.ok()) return "the attach answer's header: " + h.error().describe();
    if (h->payload_bytes == 0) return {};
    std::vector<uint8_t> text(std::min<uint32_t>(h->payload_bytes, 4096));
    if (!read_exact(text)) return "a refusal whose text did not arrive";
    return "refused: " + std::string(text.begin(), text.end());
  }
  // Reads and discards until the node closes the connection; false when it
  // is still open after `limit`.
  bool closed_by_node(std::chrono::milliseconds limit) const {
    const auto deadline = Clock::now() + limit;
    std::vector<uint8_t> sink(1 << 16);
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      if (::recv(fd_, sink.data(), sink.size(), 0) <= 0) return true;
    }
    return false;
  }

 private:
  bool read_exact(std::vector<uint8_t>& out) const {
    size_t got = 0;
    while (got < out.size()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) return false;
      const ssize_t r = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
};

class HostileClient {
 public:
  HostileClient(const HostileClientOptions& o, std::unique_ptr<Client> channel, std::unique_ptr<Client> middleman)
      : o_(o), d_(o.seed), channel_(std::move(channel)), middleman_(std::move(middleman)) {}

  HostileClientSummary run() {
    const auto end = Clock::now() + o_.duration;
    while (Clock::now() < end && !s_.session_lost) {
      if (d_.one_in(8) && !socket_path().empty())
        bad_frame();
      else
        request();
    }
    return s_;
  }

 private:
  const std::string& socket_path() const { return channel_->session().channel_socket; }

  // Whether the node died (or ended the session) under a raw connection:
  // then its failure is the node's death, which the session's own calls
  // report as node_lost, not a wrong answer. One ping through the session
  // tells; it marks the session lost.
  bool session_gone() {
    Result<std::vector<uint8_t>> echo = channel_->raw(kPingRoute, {1, 2, 3});
    if (echo.ok()) return false;
    if (echo.error().code == ErrorCode::node_lost || echo.error().code == ErrorCode::session_ended) {
      s_.session_lost = true;
      return true;
    }
    return false;
  }

  void unexpected(const std::string& what) {
    ++s_.unexpected;
    if (s_.first_unexpected.empty()) s_.first_unexpected = what;
  }

  void request() {
    std::vector<RouteId> routes{kPingRoute};
    for_each_route([&]<class R>() { routes.push_back(R::id); });
    const RouteId route = routes[d_.below(static_cast<uint32_t>(routes.size()))];
    std::vector<uint8_t> bytes = random_request(route, d_);
    if (route != kPingRoute && !d_.one_in(3)) {
      mutate(bytes, d_);
      ++s_.mutated;
    }
    const bool on_channel = channel_->on_session_channel() && d_.one_in(2);
    Client& client = on_channel ? *channel_ : *middleman_;
    ++(on_channel ? s_.requests_channel : s_.requests_middleman);
    Result<std::vector<uint8_t>> reply = client.raw(route, bytes);
    if (!reply.ok()) {
      const ErrorCode c = reply.error().code;
      if (c == ErrorCode::node_lost || c == ErrorCode::session_ended) {
        s_.session_lost = true;
        return;
      }
      unexpected("route " + std::string(route_name(route)) + " on the " + (on_channel ? "channel" : "middleman") +
                 ": no reply (" + reply.error().describe() + ")");
      return;
    }
    bool receipt = false;
    if (!decodes_as_answer(route, bytes, *reply, &receipt)) {
      unexpected("route " + std::string(route_name(route)) + ": the reply is neither its receipt nor an ErrorMessage");
      return;
    }
    ++(receipt ? s_.receipts : s_.typed_errors);
  }

  // A connection of its own per bad frame: the node must close it and keep
  // the session's other connections (and the session) as they were.
  void bad_frame() {
    RawConnection raw(socket_path());
    // Refused because the node just died (its socket file stays until the
    // next node replaces it) is the node's death, not a wrong answer.
    if (!raw.open()) {
      if (!session_gone()) unexpected("the channel socket refused a connection");
      return;
    }
    const std::string& ticket = channel_->session().channel_ticket;
    const uint32_t kind = d_.below(7);
    if (kind >= 2 && kind <= 5) {
      const std::string refused = raw.attach(ticket);
      if (!refused.empty() && !session_gone())
        return unexpected("attaching with this session's own ticket: " + refused);
      if (!refused.empty()) return;
    }
    std::vector<uint8_t> bytes;
    switch (kind) {
      case 0:  // a request before the attach frame
        bytes = RawConnection::frame(AllocatorRoute::id, 2, random_request(AllocatorRoute::id, d_));
        break;
      case 1: {  // a wrong ticket
        std::string wrong = ticket;
        if (!wrong.empty()) wrong[d_.below(static_cast<uint32_t>(wrong.size()))] ^= 1;
        bytes = RawConnection::frame(kAttachRoute, 1, std::vector<uint8_t>(wrong.begin(), wrong.end()));
        break;
      }
      case 2: {  // a route nobody declared
        ChannelHeaderBytes h = write_channel_header({0, kPingRoute, 2});
        h[4] = static_cast<uint8_t>(200 + d_.below(50));
        bytes.assign(h.begin(), h.end());
        break;
      }
      case 3: {  // non-zero flags
        ChannelHeaderBytes h = write_channel_header({0, kPingRoute, 2});
        h[6] = static_cast<uint8_t>(1 + d_.below(255));
        bytes.assign(h.begin(), h.end());
        break;
      }
      case 4: {  // a payload above the limit, announced and never sent
        ChannelHeaderBytes h = write_channel_header({kChannelMaxPayloadBytes, AllocatorRoute::id, 2});
        h[0] += 1;
        bytes.assign(h.begin(), h.end());
        break;
      }
      case 6: {  // a hello with a forged token, its bytes mutated: a typed refusal, then the close
        std::vector<uint8_t> hello = codec::encode(HelloRequest{std::string(32, '0'), "hostile", 1});
        mutate(hello, d_);
        bytes = RawConnection::frame(kHelloRoute, 1, hello);
        break;
      }
      default: {  // a frame cut off: the connection closes mid-frame
        bytes = RawConnection::frame(AllocatorRoute::id, 2, random_request(AllocatorRoute::id, d_));
        bytes.resize(d_.below(static_cast<uint32_t>(bytes.size())));
        (void)raw.send_bytes(bytes);
        ++s_.frames_refused;
        return;  // closing it is the fault; nothing to wait for
      }
    }
    if (!raw.send_bytes(bytes)) {
      if (!session_gone()) unexpected("the node closed the connection before the bad frame");
      return;
    }
    if (!raw.closed_by_node(std::chrono::milliseconds(5000)))
      return unexpected("the node kept a connection open after a bad frame (kind " + std::to_string(kind) + ")");
    ++s_.frames_refused;
  }

  const HostileClientOptions& o_;
  Draw d_;
  std::unique_ptr<Client> channel_;    // calls on the session channel (when the node offers one)
  std::unique_ptr<Client> middleman_;  // the same principal through the middleman
  HostileClientSummary s_;
};

}  // namespace

Result<HostileClientSummary> run_hostile_client(const HostileClientOptions& options) {
  ClientOptions o;
  o.worker_name = options.name;
  o.timeout = options.call_timeout;
  Result<std::unique_ptr<Client>> channel = Client::connect(options.node, options.token_hex, o);
  if (!channel.ok()) return channel.error();
  o.use_session_channel = false;
  o.worker_name = options.name + "-middleman";
  Result<std::unique_ptr<Client>> middleman = Client::connect(options.node, options.token_hex, o);
  if (!middleman.ok()) return middleman.error();
  HostileClient client(options, std::move(*channel), std::move(*middleman));
  return client.run();
}

}  // namespace kvrt::chaos
