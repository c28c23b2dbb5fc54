#pragma once
// The semantic reuse gate of spec 0x01A ("CacheCompatibilityManifest: The
// Semantic Reuse Gate"): a producer's cached K/V may serve a consumer only if
// every equality-bearing field matches. The first failing field, in the order
// of the spec's semantic_cache_compatible pseudo-code, is reported as a typed
// Error. Provenance (tokenizer and chat-template revision, request id,
// sampling policy) is never compared.
#include <array>
#include <optional>
#include <span>
#include <string_view>

#include "services/common/error.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/identity/layout_mismatch.hpp"

namespace kvrt {

// Equality-bearing fields, numbered in the spec's comparison order. The spec
// compares "cache-isolation namespace and generation" as one step; kvrt
// reports the generation separately (right after the name) because a client
// answers the two differently: a wrong namespace is an authorization matter,
// an old generation means "re-admit under the successor" (Invalidation).
enum class CompatibilityField : uint8_t {
  cache_abi_sha256 = 0,
  cache_layout_sha256 = 1,
  model_generation = 2,
  adapter_identity = 3,
  weight_transform_identity = 4,
  position_contract_sha256 = 5,
  covered_token_ids = 6,
  input_side_data_identity = 7,  // struct member input_side_data
  cache_isolation_namespace = 8,
  namespace_generation = 9,
  cache_salt = 10,
  publication_generation = 11,
};
inline constexpr size_t kCompatibilityFieldCount = 12;

// Every equality-bearing field in spec order: compatible() walks this array.
inline constexpr std::array<CompatibilityField, kCompatibilityFieldCount> kCompatibilityFieldOrder{
    CompatibilityField::cache_abi_sha256,
    CompatibilityField::cache_layout_sha256,
    CompatibilityField::model_generation,
    CompatibilityField::adapter_identity,
    CompatibilityField::weight_transform_identity,
    CompatibilityField::position_contract_sha256,
    CompatibilityField::covered_token_ids,
    CompatibilityField::input_side_data_identity,
    CompatibilityField::cache_isolation_namespace,
    CompatibilityField::namespace_generation,
    CompatibilityField::cache_salt,
    CompatibilityField::publication_generation,
};

// The name reported in Error::field (the spec's name; equal to the struct
// member's except input_side_data_identity).
std::string_view to_string(CompatibilityField f);

// Either compatible, or the first failing field and its typed error
// (ErrorCode::incompatible, field = to_string(field), reason with both operands).
struct CompatibilityVerdict {
  std::optional<CompatibilityField> failing_field;  // nullopt: compatible
  Error error;                                      // code ok when compatible
  // Filled only by compatible_explained() for a layout digest mismatch.
  std::optional<LayoutFieldDifference> layout_difference;

  bool ok() const { return !failing_field.has_value(); }
  explicit operator bool() const { return ok(); }
  Status status() const { return ok() ? Status::success() : Status(error); }
};

// Does the single field f match? nullopt when equal, else the typed error.
// Token values and salts never appear in the reason: a rejected lookup must
// not disclose another request's prefix or the salt that guards it (0x01A:
// isolation gates discovery; docs/architecture.md: no raw tokens or unsalted keys leave).
std::optional<Error> compare_field(CompatibilityField f, const CacheCompatibilityManifest& producer,
                                   const CacheCompatibilityManifest& consumer);

// The first failing field among `fields`, walked in the order given.
CompatibilityVerdict compatible_on(std::span<const CompatibilityField> fields,
                                   const CacheCompatibilityManifest& producer,
                                   const CacheCompatibilityManifest& consumer);

// semantic_cache_compatible(producer, consumer) of 0x01A. The verdict (which
// field fails, if any) is symmetric in its two arguments; only the roles in
// the reason text swap.
CompatibilityVerdict compatible(const CacheCompatibilityManifest& producer, const CacheCompatibilityManifest& consumer);

// compatible(), and when the layout digest is the failing field, names the
// layout field that differs (explain_layout_mismatch) in the reason and in
// layout_difference. The layouts must be the ones the manifests were built
// from; if their digests do not match the manifests', the reason says so
// and no layout field is named.
CompatibilityVerdict compatible_explained(const CacheCompatibilityManifest& producer,
                                          const CacheCompatibilityManifest& consumer,
                                          const CacheLayoutManifest& producer_layout,
                                          const CacheLayoutManifest& consumer_layout);

}  // namespace kvrt
