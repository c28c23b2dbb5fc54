#pragma once
// Canonical SHA-256 of a CacheCompatibilityManifest (spec 0x01A). It covers
// exactly the equality-bearing fields, in compatible()'s order, so that
//   compatibility_digest(a) == compatibility_digest(b)  <=>  compatible(a, b)
// (up to SHA-256 collisions). Provenance — tokenizer and chat-template
// revision, request id, sampling policy — never changes it: two requests that
// may share K/V must be able to find each other by this digest.
#include "services/common/digest.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"

namespace kvrt {

Sha256Digest compatibility_digest(const CacheCompatibilityManifest& m);

}  // namespace kvrt
