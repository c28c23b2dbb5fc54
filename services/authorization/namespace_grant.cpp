#include "services/authorization/namespace_grant.hpp"

namespace kvrt {

Sha256Digest cache_salt_digest(std::string_view salt) {
  return CanonicalWriter("kvrt.cache_salt.v1").str("salt", salt).finish();
}

}  // namespace kvrt
