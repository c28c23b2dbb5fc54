// The session channel's framing (services/session/channel_frame.hpp) as the
// node's channel server reads a connection: the first byte sets the size of
// the pieces the stream arrives in (1 to 256 bytes, as recv hands them out),
// the rest is the stream. Every frame handed out must be the stream's next
// bytes exactly (header, then payload), its header must write back to the
// bytes it was read from, and a refused header must be a typed
// decode_failed after which the stream stays broken.
#include "services/session/channel_frame.hpp"

#include <algorithm>
#include <cstring>
#include <span>

#include "fuzz/fuzz_target.hpp"

int kvrt_fuzz_channel_frame(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = size_t{data[0]} + 1;
  const std::span<const uint8_t> stream(data + 1, size - 1);
  kvrt::ChannelFrameReader reader;
  size_t handed_out = 0;  // [bytes] of the stream taken as whole frames
  size_t appended = 0;
  bool broken = false;
  while (appended < stream.size() && !broken) {
    const size_t n = std::min(piece, stream.size() - appended);
    reader.append(stream.subspan(appended, n));
    appended += n;
    for (;;) {
      kvrt::Result<std::optional<kvrt::ChannelFrameReader::Frame>> frame = reader.next();
      if (!frame.ok()) {
        KVRT_FUZZ_TYPED_ERROR(frame.error());
        KVRT_FUZZ_REQUIRE(frame.error().code == kvrt::ErrorCode::decode_failed, frame.error().describe());
        // The header that broke it is the next one of the stream, and it
        // reads the same on its own.
        KVRT_FUZZ_REQUIRE(!kvrt::read_channel_header(stream.subspan(handed_out, kvrt::kChannelHeaderBytes)).ok(), "");
        KVRT_FUZZ_REQUIRE(!reader.next().ok(), "a broken stream stays broken");
        broken = true;
        break;
      }
      if (!frame->has_value()) {
        KVRT_FUZZ_REQUIRE(reader.buffered() == appended - handed_out, "");
        break;
      }
      const kvrt::ChannelFrameReader::Frame& f = **frame;
      const kvrt::ChannelHeaderBytes header = kvrt::write_channel_header(f.header);
      KVRT_FUZZ_REQUIRE(handed_out + kvrt::kChannelHeaderBytes + f.payload.size() <= appended, "");
      KVRT_FUZZ_REQUIRE(std::memcmp(header.data(), stream.data() + handed_out, header.size()) == 0,
                        "a header writes back to the bytes it was read from");
      KVRT_FUZZ_REQUIRE(f.payload.size() == f.header.payload_bytes, "");
      KVRT_FUZZ_REQUIRE(
          f.payload.empty() || std::memcmp(f.payload.data(), stream.data() + handed_out + kvrt::kChannelHeaderBytes,
                                           f.payload.size()) == 0,
          "a payload is the stream's bytes after its header");
      KVRT_FUZZ_REQUIRE(f.header.payload_bytes <= kvrt::kChannelMaxPayloadBytes, "");
      KVRT_FUZZ_REQUIRE(kvrt::is_known_route(f.header.route), "");
      handed_out += kvrt::kChannelHeaderBytes + f.payload.size();
    }
  }
  return 0;
}
