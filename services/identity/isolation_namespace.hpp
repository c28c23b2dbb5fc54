#pragma once
// CacheIsolationNamespace rules (spec 0x01A "CacheIsolationNamespace: Reuse Is
// Also An Authorization Decision"): its canonical name, structural validation
// and canonical digest. The struct itself lives in cache_compatibility_manifest.hpp.
#include <string>
#include <string_view>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"

namespace kvrt {

std::string_view to_string(PublicationPolicy p);

// "deployment/tenant": the value a CacheCompatibilityManifest carries in
// cache_isolation_namespace. validate_isolation_namespace() forbids '/' inside
// either part, so the joined name is unambiguous.
std::string namespace_name(const CacheIsolationNamespace& ns);

// Non-empty deployment and tenant without '/', a known publication policy.
// The salt may be empty: the spec requires it only "where supported".
Status validate_isolation_namespace(const CacheIsolationNamespace& ns);

// Canonical SHA-256 over every field, generation and salt included: two
// generations of one namespace never share a digest.
Sha256Digest isolation_namespace_digest(const CacheIsolationNamespace& ns);

}  // namespace kvrt
