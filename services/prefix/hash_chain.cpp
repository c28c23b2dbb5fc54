#include "services/prefix/hash_chain.hpp"

#include <openssl/evp.h>

#include "services/common/hex.hpp"
// XXH3 is compiled into this file (static, inlinable): a 16-token block is
// an ~81-byte message, where a call through the shared library's PLT costs
// a noticeable share of the hash itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <cstring>

#include "services/common/assert.hpp"
#include "services/prefix/sha256_compress.hpp"

namespace kvrt {

namespace {

constexpr uint8_t kFlagExtras = 1;
constexpr uint8_t kFlagTail = 2;

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::string BlockHash::hex() const { return to_hex(bytes); }

Result<ChainHasher> ChainHasher::create(HashFamily family, uint32_t block_tokens, Sha256Path path) {
  if (block_tokens == 0 || block_tokens > UINT16_MAX)
    return make_error(ErrorCode::config_field, "hash block size must be in [1, 65535] tokens", "hash_block_size");
  if (family != HashFamily::sha256 && family != HashFamily::xxh3_bits128)
    return make_error(ErrorCode::config_field, "unknown hash family", "hash_family");
  ChainHasher h;
  h.family_ = family;
  h.block_tokens_ = block_tokens;
  // The pipeline needs whole 64-byte token blocks: 16 int32 tokens each.
  h.accelerated_ = family == HashFamily::sha256 && path == Sha256Path::automatic && block_tokens % 16 == 0 &&
                   sha256x::sha_ni_available();
  return h;
}

BlockHash ChainHasher::digest_message(std::span<const uint8_t> message) const {
  BlockHash out;
  if (family_ == HashFamily::sha256) {
    unsigned int len = 0;
    const int rc = EVP_Digest(message.data(), message.size(), out.bytes.data(), &len, EVP_sha256(), nullptr);
    KVRT_ASSERT(rc == 1 && len == 32, "EVP_Digest(sha256) failed");
  } else {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits(message.data(), message.size()));
    std::memcpy(out.bytes.data(), canonical.digest, 16);
  }
  return out;
}

BlockHash ChainHasher::root(std::string_view scope_bytes) const {
  return digest_message(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scope_bytes.data()), scope_bytes.size()));
}

void ChainHasher::build_message(const BlockHash& parent, std::span<const TokenId> tokens,
                                const std::optional<ExtrasKey>& extras, const uint32_t* tail_rows, uint8_t policy_id,
                                std::vector<uint8_t>& out) const {
  out.clear();
  out.reserve(tokens.size() * 4 + 32 + 32 + 6);
  for (TokenId t : tokens) put_u32(out, static_cast<uint32_t>(t));
  out.insert(out.end(), parent.bytes.begin(), parent.bytes.begin() + static_cast<ptrdiff_t>(digest_bytes()));
  uint8_t flags = 0;
  if (extras) {
    out.insert(out.end(), extras->digest.bytes.begin(), extras->digest.bytes.end());
    flags |= kFlagExtras;
  }
  if (tail_rows != nullptr) {
    put_u32(out, *tail_rows);
    out.push_back(policy_id);
    flags |= kFlagTail;
  }
  out.push_back(flags);
}

BlockHash ChainHasher::full_block(const BlockHash& parent, std::span<const TokenId> tokens,
                                  const std::optional<ExtrasKey>& extras) const {
  KVRT_ASSERT(tokens.size() == block_tokens_, "full_block needs exactly one hash block of tokens");
  std::vector<uint8_t> message;
  build_message(parent, tokens, extras, nullptr, 0, message);
  return digest_message(message);
}

BlockHash ChainHasher::partial_tail(const BlockHash& parent, std::span<const TokenId> tokens, uint8_t policy_id,
                                    const std::optional<ExtrasKey>& extras) const {
  KVRT_ASSERT(!tokens.empty() && tokens.size() < block_tokens_, "a partial tail has 0 < v < P rows");
  const uint32_t rows = static_cast<uint32_t>(tokens.size());
  std::vector<uint8_t> message;
  build_message(parent, tokens, extras, &rows, policy_id, message);
  return digest_message(message);
}

void ChainHasher::extend_chain(const BlockHash& root, std::span<const TokenId> tokens, const BlockExtrasPlan& extras,
                               std::vector<BlockHash>& hashes) const {
  const size_t full = tokens.size() / block_tokens_;
  if (hashes.size() >= full) return;
  if (accelerated_ && extras.none()) {
    extend_sha_ni(root, tokens, hashes);
    return;
  }
  if (family_ == HashFamily::xxh3_bits128 && extras.none()) {
    extend_xxh3(root, tokens, hashes);
    return;
  }
  hashes.reserve(full);
  std::vector<uint8_t> message;
  for (size_t i = hashes.size(); i < full; ++i) {
    const BlockHash& parent = i == 0 ? root : hashes[i - 1];
    build_message(parent, tokens.subspan(i * block_tokens_, block_tokens_), extras.key(static_cast<uint32_t>(i)),
                  nullptr, 0, message);
    hashes.push_back(digest_message(message));
  }
}

// XXH3-128 of (tokens || parent || 0x00) for every block: the message is
// assembled in one buffer (the token bytes are already in message order on a
// little-endian host), so a block costs one copy and one XXH3 call.
void ChainHasher::extend_xxh3(const BlockHash& root, std::span<const TokenId> tokens,
                              std::vector<BlockHash>& hashes) const {
  static_assert(std::endian::native == std::endian::little, "token bytes are little-endian");
  const size_t full = tokens.size() / block_tokens_;
  const size_t token_bytes = size_t{block_tokens_} * sizeof(TokenId);
  const size_t message_bytes = token_bytes + 16 + 1;
  uint8_t on_stack[256 * sizeof(TokenId) + 17];
  std::vector<uint8_t> on_heap;
  uint8_t* message = on_stack;
  if (message_bytes > sizeof on_stack) {
    on_heap.resize(message_bytes);
    message = on_heap.data();
  }
  message[message_bytes - 1] = 0;  // flags: no extras, not a tail
  size_t i = hashes.size();
  std::memcpy(message + token_bytes, (i == 0 ? root : hashes[i - 1]).bytes.data(), 16);
  hashes.resize(full);
  for (; i < full; ++i) {
    std::memcpy(message, tokens.data() + i * block_tokens_, token_bytes);
    // The digest's canonical bytes go straight into the parent field of the
    // next block's message, then into the chain.
    auto* parent = reinterpret_cast<XXH128_canonical_t*>(message + token_bytes);
    XXH128_canonicalFromHash(parent, XXH3_128bits(message, message_bytes));
    std::memcpy(hashes[i].bytes.data(), parent->digest, 16);
  }
}

// SHA-256 of (tokens || parent || 0x00) for every block, pipelined: the k
// token compressions of block i+1 start from the IV and do not need h_i, so
// the last of them runs interleaved with block i's final compression, whose
// message is parent (32 bytes) || flags || padding || bit length.
void ChainHasher::extend_sha_ni(const BlockHash& root, std::span<const TokenId> tokens,
                                std::vector<BlockHash>& hashes) const {
  const size_t full = tokens.size() / block_tokens_;
  const size_t k = block_tokens_ / 16;  // token compressions per block
  const uint64_t message_bits = (uint64_t{block_tokens_} * 4 + 32 + 1) * 8;
  const auto* bytes = reinterpret_cast<const uint8_t*>(tokens.data());
  static_assert(sizeof(TokenId) == 4, "messages encode 4-byte tokens");
  // The token bytes are hashed in memory order: little-endian hosts only (x86).
  static_assert(std::endian::native == std::endian::little, "token bytes are little-endian");

  uint8_t final_block[64] = {};
  final_block[32] = 0x00;  // flags: no extras, not a tail
  final_block[33] = 0x80;  // padding bit
  for (int b = 0; b < 8; ++b) final_block[63 - b] = static_cast<uint8_t>(message_bits >> (8 * b));

  size_t i = hashes.size();
  hashes.resize(full);
  const uint8_t* parent = i == 0 ? root.bytes.data() : hashes[i - 1].bytes.data();
  sha256x::State mid = sha256x::kInitialState;
  sha256x::compress(mid, bytes + i * block_tokens_ * 4, k);
  for (; i < full; ++i) {
    std::memcpy(final_block, parent, 32);
    sha256x::State current = mid;
    if (i + 1 < full) {
      const uint8_t* next_tokens = bytes + (i + 1) * block_tokens_ * 4;
      mid = sha256x::kInitialState;
      if (k > 1) sha256x::compress(mid, next_tokens, k - 1);
      sha256x::compress_pair(mid, next_tokens + (k - 1) * 64, current, final_block);
    } else {
      sha256x::compress(current, final_block, 1);
    }
    sha256x::store_digest(current, hashes[i].bytes.data());
    parent = hashes[i].bytes.data();
  }
}

}  // namespace kvrt
