#include "services/prefix/block_extras.hpp"

#include <string>

namespace kvrt {

Status RequestExtras::validate() const {
  for (size_t k = 0; k < mm_features.size(); ++k) {
    const auto& f = mm_features[k];
    const std::string where = "mm_features[" + std::to_string(k) + "]";
    if (f.identifier.empty())
      return make_error(ErrorCode::invalid_argument, "a multimodal feature needs an identifier", where + ".identifier");
    if (f.length == 0)
      return make_error(ErrorCode::invalid_argument, "a multimodal feature covers at least one position",
                        where + ".length");
    if (uint64_t{f.offset} + f.length > UINT32_MAX)
      return make_error(ErrorCode::invalid_argument, "a multimodal feature ends past position 2^32", where + ".length");
  }
  return Status::success();
}

BlockExtrasPlan::BlockExtrasPlan(const RequestExtras& extras, uint32_t block_tokens)
    : extras_(extras), block_tokens_(block_tokens), none_(extras.empty()) {
  if (!extras_.lora_name.empty()) {
    CanonicalWriter w("kvrt.prefix.extras.v1");
    w.str("lora_name", extras_.lora_name);
    plain_ = ExtrasKey{w.finish()};
  }
}

bool BlockExtrasPlan::block_is_plain(uint32_t block) const {
  if (block == 0 && !extras_.cache_salt.empty()) return false;
  if (block < extras_.prompt_embedding_digests.size()) return false;
  const uint64_t start = uint64_t{block} * block_tokens_, end = start + block_tokens_;
  for (const auto& f : extras_.mm_features)
    if (f.offset < end && uint64_t{f.offset} + f.length > start) return false;
  return true;
}

ExtrasKey BlockExtrasPlan::compute(uint32_t block) const {
  // Field order is fixed and every field is tagged, so two different
  // projections never share an encoding (digest.hpp).
  CanonicalWriter w("kvrt.prefix.extras.v1");
  if (!extras_.lora_name.empty()) w.str("lora_name", extras_.lora_name);
  const int64_t start = int64_t{block} * block_tokens_, end = start + block_tokens_;
  uint64_t overlapping = 0;
  for (const auto& f : extras_.mm_features)
    if (f.offset < end && int64_t{f.offset} + f.length > start) ++overlapping;
  if (overlapping > 0) {
    w.begin_list("mm_features", overlapping);
    for (const auto& f : extras_.mm_features)
      if (f.offset < end && int64_t{f.offset} + f.length > start)
        // Block-relative offset: negative when the feature began in an earlier block.
        w.str("identifier", f.identifier).i64("relative_offset", int64_t{f.offset} - start).u32("length", f.length);
  }
  if (block == 0 && !extras_.cache_salt.empty()) w.str("cache_salt", extras_.cache_salt);
  if (block < extras_.prompt_embedding_digests.size())
    w.digest("prompt_embedding_sha256", extras_.prompt_embedding_digests[block]);
  return ExtrasKey{w.finish()};
}

std::optional<ExtrasKey> BlockExtrasPlan::key(uint32_t block) const {
  if (none_) return std::nullopt;
  if (block_is_plain(block)) return plain_;  // nullopt when there is no adapter either
  return compute(block);
}

}  // namespace kvrt
