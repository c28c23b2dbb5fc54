#pragma once
// The extra-key projection E_i of a hash block (spec 0x07B, 0x01A
// "ConcretePrefixKey"): the inputs besides token ids that change a block's
// K/V. Observed at the pinned vLLM revision and adopted here:
//   - the adapter (LoRA) name: an extra of every block;
//   - multimodal feature identifiers overlapping the block, with their
//     offsets relative to the block's first position;
//   - the cache salt: an extra of block 0 only (descendants inherit it
//     through the parent chain, 0x07F);
//   - the digest of the prompt embeddings the block covers.
// E_i enters the hash message as a 32-byte SHA-256 of its canonical encoding
// (ExtrasKey), or not at all when the block has no extra.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// A multimodal input occupying prompt positions [offset, offset + length).
struct MultimodalFeatureRef {
  std::string identifier;  // content hash / feature id of the input
  uint32_t offset = 0;     // first covered prompt position [tokens]
  uint32_t length = 0;     // covered positions [tokens], > 0

  friend bool operator==(const MultimodalFeatureRef&, const MultimodalFeatureRef&) = default;
};

struct RequestExtras {
  std::string lora_name;   // empty: no adapter
  std::string cache_salt;  // empty: no salt
  std::vector<MultimodalFeatureRef> mm_features;
  // SHA-256 of the prompt-embedding rows of each hash block, in block order;
  // empty for a token prompt. Block i >= size() has no embedding digest.
  std::vector<Sha256Digest> prompt_embedding_digests;

  bool empty() const {
    return lora_name.empty() && cache_salt.empty() && mm_features.empty() && prompt_embedding_digests.empty();
  }
  // Every feature non-empty with a non-empty identifier.
  Status validate() const;

  friend bool operator==(const RequestExtras&, const RequestExtras&) = default;
};

// Digest of one block's canonical extras.
struct ExtrasKey {
  Sha256Digest digest;
  friend bool operator==(const ExtrasKey&, const ExtrasKey&) = default;
};

// E_i for every block of one request, computed once: blocks that carry only
// the adapter share one key, so a LoRA request pays one SHA-256 for all of
// them. key(i) is nullopt for a block without extras.
class BlockExtrasPlan {
 public:
  BlockExtrasPlan() = default;  // no extras anywhere
  BlockExtrasPlan(const RequestExtras& extras, uint32_t block_tokens);

  // E_i of the hash block starting at position i * block_tokens.
  std::optional<ExtrasKey> key(uint32_t block) const;
  bool none() const { return none_; }
  const RequestExtras& extras() const { return extras_; }

 private:
  ExtrasKey compute(uint32_t block) const;
  bool block_is_plain(uint32_t block) const;  // adapter only (or nothing)

  RequestExtras extras_;  // a copy: the plan outlives the caller's request object
  uint32_t block_tokens_ = 0;
  bool none_ = true;
  std::optional<ExtrasKey> plain_;  // key of an adapter-only block
};

}  // namespace kvrt
