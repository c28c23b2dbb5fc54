#pragma once
// Invalidation causes and their receipt (spec 0x01A "Invalidation Produces A
// Successor Namespace"): when weights, adapters, transforms, position
// semantics, representation or shard ownership change, the runtime must not
// relabel old blocks as new. The successor generation is built from new
// GenerationFacts; this file says which facts each cause owns and checks that
// a proposed successor really changes them.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/identity/compatibility_manifest_builder.hpp"

namespace kvrt {

enum class InvalidationCause : uint8_t {
  weights = 0,         // base weights: model_generation advances
  adapter = 1,         // active adapter set: adapter_identity changes
  transform = 2,       // weight transform: weight_transform_identity changes
  positions = 3,       // position contract: position_contract_sha256 changes
  representation = 4,  // dtype, quantization, axis/stride, physical mode or block sizes change
  shard = 5,           // TP world/rank, cache grouping or local heads change
};
inline constexpr std::array<InvalidationCause, 6> kInvalidationCauses{
    InvalidationCause::weights,   InvalidationCause::adapter,        InvalidationCause::transform,
    InvalidationCause::positions, InvalidationCause::representation, InvalidationCause::shard,
};
std::string_view to_string(InvalidationCause c);

// The facts one namespace generation's manifests are built from: everything
// an invalidation may change (request-specific tokens and side inputs are not).
struct GenerationFacts {
  CacheLayoutManifest layout;
  ArtifactIdentity artifact;

  friend bool operator==(const GenerationFacts&, const GenerationFacts&) = default;
};

// A valid layout and a 64-hex position contract digest.
Status validate_generation_facts(const GenerationFacts& facts);

// Every fact that differs: layout paths as diff_layouts names them, then
// "adapter_identity", "weight_transform_identity", "position_contract_sha256".
std::vector<std::string> changed_facts(const GenerationFacts& current, const GenerationFacts& successor);

// A successor must be valid, must not move model_generation backwards, and
// must change at least one fact its cause owns (an invalidation that changes
// nothing it claims to would be a relabelling). Other facts may change too;
// the receipt lists them all. ErrorCode::invalid_argument naming the fact.
Status check_invalidation(InvalidationCause cause, const GenerationFacts& current, const GenerationFacts& successor);

// The successor facts a live node derives for a cause from the current ones
// and the new value of the fact the cause owns (`identity`):
//   weights    model_generation + 1, or `identity` as a decimal generation
//              above the current one;
//   adapter    adapter_identity = identity (non-empty);
//   transform  weight_transform_identity = identity (non-empty);
//   positions  position_contract_sha256 = identity (64 lowercase hex).
// representation and shard change the bytes of a block (dtype, heads per
// rank, block sizes), which pools already laid out cannot follow: they are
// refused (invalid_argument, field "cause"), and need a node started with
// the successor layout. The result passes check_invalidation.
Result<GenerationFacts> live_successor_facts(InvalidationCause cause, const GenerationFacts& current,
                                             std::string_view identity);

// Immutable record of one invalidation (docs/conventions.md habit 5).
struct InvalidationReceipt {
  std::string namespace_name;
  InvalidationCause cause = InvalidationCause::weights;
  NamespaceGeneration old_generation;
  NamespaceGeneration new_generation;
  uint64_t old_model_generation = 0;
  uint64_t new_model_generation = 0;
  Sha256Digest old_layout_sha256;
  Sha256Digest new_layout_sha256;
  Sha256Digest old_namespace_sha256;  // isolation_namespace_digest of each generation
  Sha256Digest new_namespace_sha256;
  std::vector<std::string> changed_facts;
  uint64_t old_live_admissions = 0;  // owners still holding the frozen generation [admissions]
  bool old_reclaimed = false;        // no live owner: old state reclaimable at once

  friend bool operator==(const InvalidationReceipt&, const InvalidationReceipt&) = default;
};

}  // namespace kvrt
