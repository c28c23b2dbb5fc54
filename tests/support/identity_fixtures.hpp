#pragma once
// Shared fixtures of the [identity] suites: the spec's Loop 4 layout
// (config/layouts/two-group-tp2.toml), one tenant namespace, and the 16 token
// ids of 0x01A's "Source-To-Tensor Rejection Trace".
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/identity/compatibility_manifest_builder.hpp"
#include "services/identity/invalidation.hpp"
#include "services/identity/layout_loader.hpp"

namespace kvrt::test {

inline CacheLayoutManifest loop4_layout() {
  auto m = load_layout_manifest(std::string(KVRT_SOURCE_DIR) + "/config/layouts/two-group-tp2.toml");
  REQUIRE(m.ok());
  return *m;
}

// The position contract's content digest, as its owner (M5.1) would publish it.
inline std::string contract_digest(const std::string& contract_text) { return sha256(contract_text).hex(); }

inline ArtifactIdentity base_artifact() {
  return ArtifactIdentity{"", "", contract_digest("rope llama3 theta=500000 positions=absolute causal")};
}

inline GenerationFacts base_facts() { return GenerationFacts{loop4_layout(), base_artifact()}; }

inline CacheIsolationNamespace tenant_namespace() {
  CacheIsolationNamespace ns;
  ns.deployment_namespace = "prod-eu1";
  ns.tenant_id = "tenant-a";
  ns.generation = NamespaceGeneration{1};
  ns.cache_salt = "b5f0c2d9e4a17733";
  ns.model_cache_generation = 1;  // the layout's model_generation
  ns.publication_policy = PublicationPolicy::tenant_shared;
  return ns;
}

// 16 token ids: one full 16-token block of the Loop 4 layout.
inline std::vector<uint32_t> sixteen_tokens() {
  return {128000, 791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 13, 578, 2144, 374, 1120, 2360};
}

inline CoveredInput text_input(std::string request_id = "req-1") {
  CoveredInput in;
  in.token_ids = sixteen_tokens();
  in.publication_generation = 1;
  in.provenance = {"tok-r1", "chat-r1", std::move(request_id), "temperature=0.7 stop=[\"\\n\"]"};
  return in;
}

inline CacheCompatibilityManifest build(const CacheLayoutManifest& layout, const ArtifactIdentity& artifact,
                                        const CacheIsolationNamespace& ns, const CoveredInput& input) {
  auto m = build_compatibility_manifest(layout, artifact, ns, input);
  INFO((m.ok() ? std::string("ok") : m.error().describe()));
  REQUIRE(m.ok());
  return *m;
}

inline CacheCompatibilityManifest base_manifest(const CoveredInput& input = text_input()) {
  return build(loop4_layout(), base_artifact(), tenant_namespace(), input);
}

}  // namespace kvrt::test
