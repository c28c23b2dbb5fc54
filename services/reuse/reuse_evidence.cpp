#include "services/reuse/reuse_evidence.hpp"

#include "services/authorization/namespace_grant.hpp"

namespace kvrt {

std::string_view to_string(ReuseStep s) {
  switch (s) {
    case ReuseStep::authorize: return "authorize";
    case ReuseStep::build_key: return "build_key";
    case ReuseStep::lookup_candidate: return "lookup_candidate";
    case ReuseStep::acquire_leases: return "acquire_leases";
    case ReuseStep::validate_versions: return "validate_versions";
    case ReuseStep::validate_positions: return "validate_positions";
    case ReuseStep::await_mapping: return "await_mapping";
    case ReuseStep::freeze_snapshot: return "freeze_snapshot";
    case ReuseStep::execute: return "execute";
    case ReuseStep::finish: return "finish";
  }
  return "unknown_reuse_step";
}

Sha256Digest reuse_semantic_digest(const CacheCompatibilityManifest& m) {
  // The salt enters as its digest: the same value a NamespaceGrant carries.
  return CanonicalWriter("kvrt.reuse_semantic.v1")
      .str("cache_abi_sha256", m.cache_abi_sha256)
      .u64("model_generation", m.model_generation)
      .str("adapter_identity", m.adapter_identity)
      .str("weight_transform_identity", m.weight_transform_identity)
      .str("position_contract_sha256", m.position_contract_sha256)
      .str("cache_isolation_namespace", m.cache_isolation_namespace)
      .u64("namespace_generation", m.namespace_generation.value)
      .digest("cache_salt", cache_salt_digest(m.cache_salt))
      .finish();
}

Sha256Digest covered_tokens_digest(std::span<const uint32_t> token_ids) {
  CanonicalWriter w("kvrt.covered_tokens.v1");
  w.begin_list("token_ids", token_ids.size());
  for (uint32_t t : token_ids) w.u32("t", t);
  return w.finish();
}

}  // namespace kvrt
