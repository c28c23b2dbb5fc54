#pragma once
// The parent hash chain of spec 0x07B:
//     h_0 = H(root, X_0, E_0),   h_i = H(h_{i-1}, X_i, E_i)
// and the immutable partial tail of 0x07D:
//     h_tail = H(h_parent, X_tail[0:v], v, partial_policy_id, E_tail).
//
// One canonical message per block, the same bytes for every family:
//     tokens   n x int32, little-endian            (n = P for a full block, v for a tail)
//     parent   the parent digest (32 bytes SHA-256, 16 bytes XXH3-128)
//     [extras] 32-byte ExtrasKey                   if flags bit 0
//     [tail]   valid_rows u32 LE, policy id u8     if flags bit 1
//     flags    1 byte
// Read from the end, the flags byte fixes every field's length, and P is
// fixed per index, so the encoding is injective: equal digests mean equal
// (parent, tokens, extras, tail) up to the family's collision resistance.
// Tokens come first so that the token part of block i+1 can be compressed
// before h_i exists (sha256_compress.hpp): the dependent work per block is
// one compression for SHA-256 with P = 16 and no extras.
//
// The root h_{-1} is H(scope bytes): the scope (namespace, generation, layout
// and model facts, prefix_scope.hpp) is thereby part of every key.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/prefix/block_extras.hpp"
#include "services/prefix/block_hash.hpp"

namespace kvrt {

// Which SHA-256 implementation computes the chain. Both produce identical
// digests; `portable` is OpenSSL EVP (the reference), `automatic` uses the
// SHA extensions when the CPU has them and the block shape allows it.
enum class Sha256Path : uint8_t { automatic, portable };

class ChainHasher {
 public:
  // Errors: block_tokens must be in [1, 65535] (config_field).
  static Result<ChainHasher> create(HashFamily family, uint32_t block_tokens, Sha256Path path = Sha256Path::automatic);

  HashFamily family() const { return family_; }
  uint32_t block_tokens() const { return block_tokens_; }
  size_t digest_bytes() const { return family_ == HashFamily::sha256 ? 32 : 16; }
  // True when full blocks without extras take the SHA-extension pipeline.
  bool accelerated() const { return accelerated_; }

  // h_{-1} for a scope's canonical bytes.
  BlockHash root(std::string_view scope_bytes) const;
  // One full block: tokens.size() must be block_tokens().
  BlockHash full_block(const BlockHash& parent, std::span<const TokenId> tokens,
                       const std::optional<ExtrasKey>& extras) const;
  // One immutable partial tail of 0 < v < P rows (0x07D).
  BlockHash partial_tail(const BlockHash& parent, std::span<const TokenId> tokens, uint8_t policy_id,
                         const std::optional<ExtrasKey>& extras) const;

  // Extends `hashes` (h_0 .. h_{k-1} so far, parent of h_0 = root) with the
  // hash of every further full block of `tokens`; a trailing partial block
  // gets none (0x07B: "pinned path hashes full blocks only").
  void extend_chain(const BlockHash& root, std::span<const TokenId> tokens, const BlockExtrasPlan& extras,
                    std::vector<BlockHash>& hashes) const;

 private:
  BlockHash digest_message(std::span<const uint8_t> message) const;
  // Message bytes of one block (the layout above) into `out`.
  void build_message(const BlockHash& parent, std::span<const TokenId> tokens, const std::optional<ExtrasKey>& extras,
                     const uint32_t* tail_rows, uint8_t policy_id, std::vector<uint8_t>& out) const;
  void extend_sha_ni(const BlockHash& root, std::span<const TokenId> tokens, std::vector<BlockHash>& hashes) const;
  void extend_xxh3(const BlockHash& root, std::span<const TokenId> tokens, std::vector<BlockHash>& hashes) const;

  HashFamily family_ = HashFamily::sha256;
  uint32_t block_tokens_ = 16;
  bool accelerated_ = false;
};

}  // namespace kvrt
