#pragma once
// PrefixScope: what the compatibility gate grants before any cache-existence
// question is asked (spec 0x01A legal order, 0x07F safe order):
//   authorize namespace -> validate namespace generation and semantic
//   manifest -> derive/lookup concrete key -> ...
// Only PrefixIndex creates scopes (open_scope behind the gate, or the single
// local scope of an index without a namespace registry), so a lookup without
// authorization does not compile.
//
// The scope's facts (namespace, generation, ABI, layout, model generation,
// adapter, weight transform, position contract, publication generation, hash
// family and block size) are hashed into the chain root h_{-1}: every key is
// scoped, so an entry published under one generation can never be a hit under
// its successor (0x07F: "retaining old entries under a new semantic world is
// not exact reuse"). Covered token ids and side inputs are not root facts:
// they are the chain itself and its per-block extras.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/prefix/block_hash.hpp"

namespace kvrt {

class PrefixScope {
 public:
  const std::string& namespace_id() const { return namespace_id_; }
  NamespaceGeneration namespace_generation() const { return namespace_generation_; }
  // The consumer manifest's compatibility digest (receipt field); zero for the local scope.
  const Sha256Digest& compatibility_manifest_sha256() const { return compatibility_sha256_; }
  const BlockHash& root() const { return root_; }
  // The authorized salt: the block-0 extra of every chain in this scope.
  const std::string& cache_salt() const { return cache_salt_; }
  // True when granted by a CacheNamespaceRegistry.
  bool gated() const { return gated_; }
  // The consumer's covered token ids; a gated lookup must ask about exactly these.
  const std::vector<uint32_t>& covered_token_ids() const { return covered_token_ids_; }

 private:
  friend class PrefixIndex;
  PrefixScope() = default;

  std::string namespace_id_;
  NamespaceGeneration namespace_generation_;
  Sha256Digest compatibility_sha256_;
  BlockHash root_;
  std::string cache_salt_;
  bool gated_ = false;
  std::vector<uint32_t> covered_token_ids_;
};

}  // namespace kvrt
