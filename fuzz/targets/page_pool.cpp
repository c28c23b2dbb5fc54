// The page-pool channel's SCM_RIGHTS message (services/mapper/page_pool_channel.hpp)
// as a worker parses it, without a socket: the control data a recvmsg wrote
// (the descriptors it carries) and the message bytes (header and page
// table). Input: byte 0 holds flags (bit 0: the kernel cut the message,
// MSG_TRUNC; bit 1: the worker expects the pool the header names, so the
// parse goes past the identity checks; otherwise it expects the fixed
// identity below), byte 1 the length of the control data that follows, then
// the message. A parsed offer re-encodes to a message that parses back to it.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_target.hpp"
#include "services/mapper/page_pool_channel.hpp"

namespace {

// The identity the seed corpus's messages carry (fuzz/seeds/fuzz_seeds.cpp).
const kvrt::PagePoolIdentity kExpected{4096, 64, kvrt::PoolGeneration{3}};

// Reads the header's identity fields (offsets 8, 16, 24: WireHeader of
// page_pool_channel.cpp) when the message is long enough.
kvrt::PagePoolIdentity identity_in(std::span<const std::byte> message) {
  if (message.size() < 32) return kExpected;
  kvrt::PagePoolIdentity id;
  uint64_t generation = 0;
  std::memcpy(&id.page_group_bytes, message.data() + 8, 8);
  std::memcpy(&id.handle_count, message.data() + 16, 8);
  std::memcpy(&generation, message.data() + 24, 8);
  id.generation = kvrt::PoolGeneration{static_cast<uint32_t>(generation)};
  return id;
}

}  // namespace

int kvrt_fuzz_page_pool(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool truncated = (data[0] & 1) != 0;
  const size_t control_bytes = std::min<size_t>(data[1], size - 2);
  const std::vector<int> fds =
      kvrt::scm_rights_fds(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data + 2), control_bytes));
  KVRT_FUZZ_REQUIRE(fds.size() <= control_bytes / sizeof(int), "more descriptors than the control data holds");

  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data + 2 + control_bytes),
                                           size - 2 - control_bytes);
  const kvrt::PagePoolIdentity expected = (data[0] & 2) != 0 ? identity_in(message) : kExpected;
  kvrt::Result<kvrt::PagePoolOffer> offer = kvrt::parse_page_pool_message(message, truncated, expected);
  if (!offer.ok()) {
    KVRT_FUZZ_TYPED_ERROR(offer.error());
    return 0;
  }
  KVRT_FUZZ_REQUIRE(offer->identity == expected, "");
  KVRT_FUZZ_REQUIRE(offer->pages.size() <= kvrt::kPagePoolMaxEntries, "");
  if (kvrt::Status valid = kvrt::validate_page_pool_offer(*offer); !valid.ok()) KVRT_FUZZ_TYPED_ERROR(valid.error());
  const std::vector<std::byte> encoded = kvrt::encode_page_pool_message(*offer);
  kvrt::Result<kvrt::PagePoolOffer> again = kvrt::parse_page_pool_message(encoded, false, expected);
  KVRT_FUZZ_REQUIRE(again.ok(), again.error().describe());
  KVRT_FUZZ_REQUIRE(
      again->identity == offer->identity && again->view_pages == offer->view_pages && again->pages == offer->pages,
      "an offer re-encodes to itself");
  KVRT_FUZZ_REQUIRE(kvrt::encode_page_pool_message(*again) == encoded, "");
  return 0;
}
