#pragma once
// One way to build a CacheCompatibilityManifest (spec 0x01A): from the layout
// generation, the M5.1 artifact facts the layout does not carry, the isolation
// namespace, and one request's exact covered input. Also the structural rules
// every manifest (built here or decoded from the wire) must satisfy.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

// Artifact identity consumed from M5.1 ("Consume M5.1's Logical Cache ABI; Do
// Not Re-Derive It"). The layout names the position contract only by id; its
// content digest comes from the owner of the contract, so a contract whose
// RoPE semantics changed under an unchanged id is still caught.
struct ArtifactIdentity {
  std::string adapter_identity;           // active adapter set; empty = none
  std::string weight_transform_identity;  // empty = none
  std::string position_contract_sha256;   // 64 lowercase hex digits

  friend bool operator==(const ArtifactIdentity&, const ArtifactIdentity&) = default;
};

// Recorded for audit and replay; never equality-bearing (0x01A).
struct RequestProvenance {
  std::string tokenizer_revision;
  std::string chat_template_revision;
  std::string request_id;
  std::string sampling_policy;
};

// One request's covered interval.
struct CoveredInput {
  std::vector<uint32_t> token_ids;             // exact token ids [tokens], non-empty
  std::vector<SideInputIdentity> side_inputs;  // any order; stored in canonical order
  uint64_t publication_generation = 0;
  RequestProvenance provenance;
};

// Canonical side-input order: (token_offset, kind, token_count, identity)
// ascending. Manifests store side inputs in this order, so two manifests
// naming the same side inputs compare equal and share a digest.
bool side_input_before(const SideInputIdentity& a, const SideInputIdentity& b);

// cache_abi_sha256, model_generation and cache_layout_sha256 come from the
// layout; namespace name, generation and salt from the namespace. Errors:
// an invalid layout or namespace (their own errors), a malformed position
// digest, a namespace whose model_cache_generation is not the layout's
// model_generation, or an invalid covered input (validate_compatibility_manifest).
Result<CacheCompatibilityManifest> build_compatibility_manifest(const CacheLayoutManifest& layout,
                                                                const ArtifactIdentity& artifact,
                                                                const CacheIsolationNamespace& ns,
                                                                const CoveredInput& input);

// Structural rules: 64-hex ABI and position digests, a non-empty namespace
// name, at least one covered token, side inputs with a non-empty identity and
// a positive count lying inside the covered interval, in canonical order with
// no duplicates. Error::field names the offending field ("input_side_data[2]").
Status validate_compatibility_manifest(const CacheCompatibilityManifest& m);

}  // namespace kvrt
