#include "services/identity/isolation_namespace.hpp"

namespace kvrt {
namespace {

Status require_name_part(std::string_view value, const char* field) {
  if (value.empty()) return make_error(ErrorCode::invalid_argument, std::string(field) + " is empty", field);
  if (value.find('/') != std::string_view::npos)
    return make_error(ErrorCode::invalid_argument,
                      std::string(field) + " \"" + std::string(value) + "\" contains '/', the name separator", field);
  return Status::success();
}

}  // namespace

std::string_view to_string(PublicationPolicy p) {
  switch (p) {
    case PublicationPolicy::private_to_request:
      return "private_to_request";
    case PublicationPolicy::tenant_shared:
      return "tenant_shared";
    case PublicationPolicy::deployment_shared:
      return "deployment_shared";
  }
  return "unknown_publication_policy";
}

std::string namespace_name(const CacheIsolationNamespace& ns) { return ns.deployment_namespace + "/" + ns.tenant_id; }

Status validate_isolation_namespace(const CacheIsolationNamespace& ns) {
  KVRT_TRY(require_name_part(ns.deployment_namespace, "deployment_namespace"));
  KVRT_TRY(require_name_part(ns.tenant_id, "tenant_id"));
  if (static_cast<uint8_t>(ns.publication_policy) > static_cast<uint8_t>(PublicationPolicy::deployment_shared))
    return make_error(ErrorCode::invalid_argument,
                      "unknown publication_policy " + std::to_string(static_cast<int>(ns.publication_policy)),
                      "publication_policy");
  return Status::success();
}

Sha256Digest isolation_namespace_digest(const CacheIsolationNamespace& ns) {
  return CanonicalWriter("kvrt.CacheIsolationNamespace.v1")
      .str("deployment_namespace", ns.deployment_namespace)
      .str("tenant_id", ns.tenant_id)
      .u64("generation", ns.generation.value)
      .str("cache_salt", ns.cache_salt)
      .u64("model_cache_generation", ns.model_cache_generation)
      .u8("publication_policy", static_cast<uint8_t>(ns.publication_policy))
      .finish();
}

}  // namespace kvrt
