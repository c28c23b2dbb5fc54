#pragma once
// The session channel's framing: a worker's fast path to its own
// session on the node, beside the middleman.
//
// Why a second transport: CAF 0.17's middleman (BASP) costs 4-5x a raw
// loopback round trip on these machines (docs/benchmarks.md, rpc): two extra
// thread hand-offs in the worker (caller -> multiplexer -> caller) and BASP's
// own framing. The channel is a plain stream socket (AF_UNIX, in the node's
// 0700 token directory) that a worker's blocking caller reads and writes
// itself; on the node a reader thread per connection turns each frame into
// the same session actor message the middleman would have delivered
// (actors/channel_server.hpp). The payload bytes are
// unchanged: the same Cap'n Proto messages, the same owners, the same
// receipts. The middleman connection stays: it carries the hello, the stats,
// and the heartbeats by which the node notices a dead or hung worker.
//
// A frame is a 16-byte header and `payload_bytes` of payload:
//   u32 payload_bytes | u16 route | u16 flags (0) | u64 sequence   (little endian)
// The first frame of a connection is `attach` with the session's channel
// ticket (SessionReceipt::channel_ticket) as payload; the node answers it
// with an empty payload, or an ErrorMessage and a closed connection. Every
// later request is answered by exactly one frame with the same route and
// sequence, in request order.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "services/common/result.hpp"
#include "services/session/routes.hpp"

namespace kvrt {

inline constexpr size_t kChannelHeaderBytes = 16;
// A larger frame is refused before its payload is read (the connection is
// then closed: the stream cannot be resynchronised).
inline constexpr uint32_t kChannelMaxPayloadBytes = 64u << 20;

struct ChannelFrameHeader {
  uint32_t payload_bytes = 0;
  RouteId route = kPingRoute;  // a route of services/session/routes.hpp, or the channel's own
  uint64_t sequence = 0;
  friend bool operator==(const ChannelFrameHeader&, const ChannelFrameHeader&) = default;
};

using ChannelHeaderBytes = std::array<uint8_t, kChannelHeaderBytes>;

ChannelHeaderBytes write_channel_header(const ChannelFrameHeader& header);
// decode_failed for a short header, a route nobody declared (routes.hpp), non-zero flags or a
// payload above kChannelMaxPayloadBytes.
Result<ChannelFrameHeader> read_channel_header(std::span<const uint8_t> bytes);

// Cuts the byte stream of one connection into frames, as the node's channel
// server reads it: bytes arrive in pieces of any size (one recv each), and
// every whole frame is handed out in order. A header that does not read
// breaks the stream for good: nothing after it can be told apart from
// payload, so the connection is closed.
class ChannelFrameReader {
 public:
  struct Frame {
    ChannelFrameHeader header;
    std::span<const uint8_t> payload;  // valid until the next append()
  };

  void append(std::span<const uint8_t> bytes);
  // The next whole frame; nullopt while the bytes buffered hold none; the
  // header's decode_failed once the stream is broken (and every time after).
  Result<std::optional<Frame>> next();
  size_t buffered() const { return inbox_.size() - consumed_; }  // [bytes] not yet handed out

 private:
  std::vector<uint8_t> inbox_;
  size_t consumed_ = 0;  // bytes of inbox_ handed out as frames
};

}  // namespace kvrt
