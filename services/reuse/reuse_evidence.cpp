#include "services/reuse/reuse_evidence.hpp"

#include "services/authorization/namespace_grant.hpp"
#include "services/identity/isolation_namespace.hpp"

namespace kvrt {

std::string_view to_string(ReuseStep s) {
  switch (s) {
    case ReuseStep::authorize:
      return "authorize";
    case ReuseStep::build_key:
      return "build_key";
    case ReuseStep::lookup_candidate:
      return "lookup_candidate";
    case ReuseStep::acquire_leases:
      return "acquire_leases";
    case ReuseStep::validate_versions:
      return "validate_versions";
    case ReuseStep::validate_positions:
      return "validate_positions";
    case ReuseStep::await_mapping:
      return "await_mapping";
    case ReuseStep::freeze_snapshot:
      return "freeze_snapshot";
    case ReuseStep::execute:
      return "execute";
    case ReuseStep::finish:
      return "finish";
  }
  return "unknown_reuse_step";
}

namespace {

// The generation-level equality-bearing facts of 0x01A, in one order for both
// spellings. The salt enters as its digest: the value a NamespaceGrant carries.
Sha256Digest semantic_fields(const std::string& abi, uint64_t model_generation, const std::string& adapter,
                             const std::string& transform, const std::string& positions, const std::string& ns,
                             NamespaceGeneration generation, const std::string& salt) {
  return CanonicalWriter("kvrt.reuse_semantic.v1")
      .str("cache_abi_sha256", abi)
      .u64("model_generation", model_generation)
      .str("adapter_identity", adapter)
      .str("weight_transform_identity", transform)
      .str("position_contract_sha256", positions)
      .str("cache_isolation_namespace", ns)
      .u64("namespace_generation", generation.value)
      .digest("cache_salt", cache_salt_digest(salt))
      .finish();
}

}  // namespace

Sha256Digest reuse_semantic_digest(const CacheCompatibilityManifest& m) {
  return semantic_fields(m.cache_abi_sha256, m.model_generation, m.adapter_identity, m.weight_transform_identity,
                         m.position_contract_sha256, m.cache_isolation_namespace, m.namespace_generation, m.cache_salt);
}

Sha256Digest reuse_semantic_digest(const CacheLayoutManifest& layout, const ArtifactIdentity& artifact,
                                   const CacheIsolationNamespace& ns) {
  // build_compatibility_manifest copies exactly these fields.
  return semantic_fields(layout.logical_cache_abi_sha256, layout.model_generation, artifact.adapter_identity,
                         artifact.weight_transform_identity, artifact.position_contract_sha256, namespace_name(ns),
                         ns.generation, ns.cache_salt);
}

Sha256Digest covered_tokens_digest(std::span<const uint32_t> token_ids) {
  CanonicalWriter w("kvrt.covered_tokens.v1");
  w.begin_list("token_ids", token_ids.size());
  for (uint32_t t : token_ids) w.u32("t", t);
  return w.finish();
}

}  // namespace kvrt
