#include "services/session/channel_frame.hpp"

#include <string>

namespace kvrt {

namespace {

template <class T>
void put(uint8_t* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <class T>
T get(const uint8_t* in) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(in[i]) << (8 * i);
  return v;
}

}  // namespace

ChannelHeaderBytes write_channel_header(const ChannelFrameHeader& header) {
  ChannelHeaderBytes out{};
  put<uint32_t>(out.data(), header.payload_bytes);
  put<uint16_t>(out.data() + 4, header.route.value);
  put<uint16_t>(out.data() + 6, 0);
  put<uint64_t>(out.data() + 8, header.sequence);
  return out;
}

Result<ChannelFrameHeader> read_channel_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < kChannelHeaderBytes)
    return make_error(ErrorCode::decode_failed,
                      "channel frame header of " + std::to_string(bytes.size()) + " bytes (16 expected)", "header");
  ChannelFrameHeader h;
  h.payload_bytes = get<uint32_t>(bytes.data());
  const uint16_t route = get<uint16_t>(bytes.data() + 4);
  const uint16_t flags = get<uint16_t>(bytes.data() + 6);
  h.sequence = get<uint64_t>(bytes.data() + 8);
  if (!is_known_route(RouteId{route}))
    return make_error(ErrorCode::decode_failed, "channel frame names unknown route " + std::to_string(route), "route");
  if (flags != 0)
    return make_error(ErrorCode::decode_failed, "channel frame has reserved flags " + std::to_string(flags) + " set",
                      "flags");
  if (h.payload_bytes > kChannelMaxPayloadBytes)
    return make_error(ErrorCode::decode_failed,
                      "channel frame of " + std::to_string(h.payload_bytes) + " bytes exceeds the limit of " +
                          std::to_string(kChannelMaxPayloadBytes),
                      "payload_bytes");
  h.route = RouteId{route};
  return h;
}

void ChannelFrameReader::append(std::span<const uint8_t> bytes) {
  // What was handed out is dropped first: a reader drained after every
  // append holds at most one partial frame besides the new bytes.
  if (consumed_ == inbox_.size()) {
    inbox_.clear();
  } else if (consumed_ > 0) {
    inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(consumed_));
  }
  consumed_ = 0;
  inbox_.insert(inbox_.end(), bytes.begin(), bytes.end());
}

Result<std::optional<ChannelFrameReader::Frame>> ChannelFrameReader::next() {
  if (buffered() < kChannelHeaderBytes) return std::optional<Frame>();
  Result<ChannelFrameHeader> header =
      read_channel_header(std::span<const uint8_t>(inbox_.data() + consumed_, kChannelHeaderBytes));
  if (!header.ok()) return header.error();
  const size_t frame = kChannelHeaderBytes + header->payload_bytes;
  if (buffered() < frame) return std::optional<Frame>();
  Frame f{*header, std::span<const uint8_t>(inbox_.data() + consumed_ + kChannelHeaderBytes, header->payload_bytes)};
  consumed_ += frame;
  return std::optional<Frame>(f);
}

}  // namespace kvrt
