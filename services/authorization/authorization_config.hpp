#pragma once
// Configuration of the namespace / authorization owner (spec 0x01A
// "CacheIsolationNamespace", 0x0CE): which cache namespaces exist and which
// principal (worker) may use which of them.
//
// TOML form (read from the node configuration; other tables are ignored):
//
//   [[namespace]]
//   deployment = "prod-eu1"             # deployment or cluster cache namespace
//   tenant = "tenant-a"                 # tenant / isolation domain
//   salt = "..."                        # optional: 128 random bits are drawn at start-up
//   publication_policy = "tenant_shared"  # optional: private_to_request | tenant_shared | deployment_shared
//   generation = 1                      # optional: initial namespace generation
//   domain = "tenant-a"                 # optional: the trust domain ([[domain]]) it belongs to
//   quota_blocks = 256                  # optional: most blocks its live requests may hold
//
//   [[domain]]                          # a trust domain: namespaces that trust each other
//   name = "tenant-a"                   # [A-Za-z0-9._-], 1..64 characters
//   quota_blocks = 512                  # optional: most blocks its namespaces hold together
//
//   [[principal]]
//   name = "worker-0"
//   role = "worker"                     # optional: "worker" (default) or "admin"
//   namespaces = ["prod-eu1/tenant-a"]  # namespace names "deployment/tenant" (a worker's only)
//   token_sha256 = "..."                # optional: SHA-256 (64 hex) of a token the operator
//                                       # distributes; otherwise the node issues one at start-up
//
// Errors name the file, line, column and field (TomlReader).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"

namespace kvrt {

class TomlReader;

struct NamespaceConfig {
  std::string deployment;
  std::string tenant;
  std::optional<std::string> salt;  // nullopt: drawn at start-up
  PublicationPolicy publication_policy = PublicationPolicy::tenant_shared;
  uint64_t generation = 1;              // initial namespace generation (>= 1)
  std::optional<std::string> domain{};  // a configured trust domain's name
  // Blocks (one per cache group: a bundle) the namespace's live requests may
  // reference together; nullopt: no quota of its own. The allocator owner
  // enforces it (services/allocator/namespace_quotas.hpp).
  std::optional<uint32_t> quota_blocks{};
  // The canonical "deployment/tenant" (namespace_name of 0x01A).
  std::string name() const;
};

// A trust domain: namespaces declared to trust each other, with a block
// quota they share.
struct DomainConfig {
  std::string name;                      // [A-Za-z0-9._-], 1..64 characters
  std::optional<uint32_t> quota_blocks;  // nullopt: no quota of its own
};

// What a principal's sessions may call (services/session/routes.hpp,
// RouteAccess). Two capabilities that never meet: a worker uses namespaces
// and their K/V; an admin (an operator, a fault campaign) arms fault points
// and, later, purges, but holds no namespace, so it can read no K/V, and a
// worker session can never reach an admin route.
enum class PrincipalRole : uint8_t { worker = 0, admin = 1 };

struct PrincipalConfig {
  std::string name;                          // [A-Za-z0-9._-], 1..64 characters
  std::vector<std::string> namespaces;       // "deployment/tenant", each configured, no duplicates; none for an admin
  std::optional<Sha256Digest> token_sha256;  // nullopt: the node issues a token
  PrincipalRole role = PrincipalRole::worker;
};

struct AuthorizationConfig {
  std::vector<DomainConfig> domains;
  std::vector<NamespaceConfig> namespaces;
  std::vector<PrincipalConfig> principals;

  // The rules the loader enforces, for configs built in code: valid and
  // unique namespaces, unique principal names and token digests, namespace
  // lists naming configured namespaces, domains named once and named by
  // namespaces only when configured, quotas of at least one block.
  // Error::field is "principal[1].namespaces[0]".
  Status validate() const;
};

// Reads [[domain]], [[namespace]] and [[principal]] from an already parsed file (the
// node shares one reader for all its sections).
Result<AuthorizationConfig> read_authorization_config(const TomlReader& reader);
Result<AuthorizationConfig> load_authorization_config(const std::string& path);
Result<AuthorizationConfig> parse_authorization_config(std::string_view text, const std::string& origin);

}  // namespace kvrt
