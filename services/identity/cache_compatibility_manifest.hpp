#pragma once
// CacheCompatibilityManifest and CacheIsolationNamespace (spec 0x01A): the
// semantic reuse gate and the authorization domain of cached K/V.
// Equality-bearing fields decide reuse; provenance fields are recorded for
// audit and replay but never decide it.
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// Who may see a cache entry (0x01A "CacheIsolationNamespace").
enum class PublicationPolicy : uint8_t {
  private_to_request = 0,  // never published to other requests
  tenant_shared = 1,       // visible to the same tenant's requests
  deployment_shared = 2,   // visible across tenants of the deployment namespace
};

struct CacheIsolationNamespace {
  std::string deployment_namespace;  // deployment or cluster cache namespace
  std::string tenant_id;             // tenant / isolation-domain identity
  NamespaceGeneration generation;    // advanced by every invalidation
  std::string cache_salt;            // unguessable salt issued by the deployment
  uint64_t model_cache_generation = 0;
  PublicationPolicy publication_policy = PublicationPolicy::tenant_shared;

  friend bool operator==(const CacheIsolationNamespace&, const CacheIsolationNamespace&) = default;
};

// A side input that changes hidden states without changing placeholder tokens
// (multimodal features, prompt embeddings): equality-bearing (0x01A).
enum class SideInputKind : uint8_t { multimodal_feature = 0, prompt_embedding = 1 };

struct SideInputIdentity {
  SideInputKind kind = SideInputKind::multimodal_feature;
  std::string identity;       // feature id or SHA-256 of the embedding tensor
  uint32_t token_offset = 0;  // first covered token position [tokens]
  uint32_t token_count = 0;   // covered positions [tokens]

  friend bool operator==(const SideInputIdentity&, const SideInputIdentity&) = default;
};

struct CacheCompatibilityManifest {
  // Equality-bearing, compared in this order by compatible() (0x01A pseudo-code).
  std::string cache_abi_sha256;
  Sha256Digest cache_layout_sha256;
  uint64_t model_generation = 0;
  std::string adapter_identity;           // empty = no adapter
  std::string weight_transform_identity;  // empty = none
  std::string position_contract_sha256;
  std::vector<uint32_t> covered_token_ids;  // exact token ids of the covered interval
  std::vector<SideInputIdentity> input_side_data;
  std::string cache_isolation_namespace;  // deployment/tenant namespace name
  NamespaceGeneration namespace_generation;
  std::string cache_salt;
  uint64_t publication_generation = 0;

  // Provenance: recorded, never equality-bearing.
  std::string tokenizer_revision;
  std::string chat_template_revision;
  std::string request_id;
  std::string sampling_policy;

  friend bool operator==(const CacheCompatibilityManifest&, const CacheCompatibilityManifest&) = default;
};

}  // namespace kvrt
