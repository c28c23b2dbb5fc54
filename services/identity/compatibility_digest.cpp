#include "services/identity/compatibility_digest.hpp"

namespace kvrt {

Sha256Digest compatibility_digest(const CacheCompatibilityManifest& m) {
  // Tags are the names compatible() reports; the order is the spec's
  // semantic_cache_compatible order. Lists carry their length, so moving a
  // token from the covered interval into a side input cannot alias.
  CanonicalWriter w("kvrt.CacheCompatibilityManifest.equality.v1");
  w.str("cache_abi_sha256", m.cache_abi_sha256)
      .digest("cache_layout_sha256", m.cache_layout_sha256)
      .u64("model_generation", m.model_generation)
      .str("adapter_identity", m.adapter_identity)
      .str("weight_transform_identity", m.weight_transform_identity)
      .str("position_contract_sha256", m.position_contract_sha256)
      .begin_list("covered_token_ids", m.covered_token_ids.size());
  for (uint32_t token : m.covered_token_ids) w.u32("token", token);
  w.begin_list("input_side_data_identity", m.input_side_data.size());
  for (const auto& s : m.input_side_data)
    w.u8("kind", static_cast<uint8_t>(s.kind))
        .str("identity", s.identity)
        .u32("token_offset", s.token_offset)
        .u32("token_count", s.token_count);
  w.str("cache_isolation_namespace", m.cache_isolation_namespace)
      .u64("namespace_generation", m.namespace_generation.value)
      .str("cache_salt", m.cache_salt)
      .u64("publication_generation", m.publication_generation);
  return w.finish();
}

}  // namespace kvrt
