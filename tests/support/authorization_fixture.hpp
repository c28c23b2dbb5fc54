#pragma once
// Shared fixtures of the [authorization] and [reuse] suites: two tenants of
// one deployment over the Loop 4 layout, three workers, and the authority
// built from them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/support/identity_fixtures.hpp"
#include "services/authorization/namespace_authority.hpp"

namespace kvrt::test {

inline const std::string kTenantA = "prod-eu1/tenant-a";
inline const std::string kTenantB = "prod-eu1/tenant-b";

// tenant-a starts at generation 4 (three invalidations happened before this
// node started), tenant-b at 1 with a salt drawn at start-up.
inline AuthorizationConfig two_tenant_config() {
  AuthorizationConfig c;
  c.namespaces.push_back(
      NamespaceConfig{"prod-eu1", "tenant-a", "b5f0c2d9e4a17733", PublicationPolicy::tenant_shared, 4});
  c.namespaces.push_back(NamespaceConfig{"prod-eu1", "tenant-b", std::nullopt, PublicationPolicy::tenant_shared, 1});
  c.principals.push_back(PrincipalConfig{"worker-a", {kTenantA}, std::nullopt});
  c.principals.push_back(PrincipalConfig{"worker-b", {kTenantB}, std::nullopt});
  c.principals.push_back(PrincipalConfig{"worker-ab", {kTenantA, kTenantB}, std::nullopt});
  return c;
}

// An authority with its issued tokens, by principal name.
struct AuthorityFixture {
  NamespaceAuthority authority;
  std::vector<IssuedToken> tokens;

  static AuthorityFixture make(const AuthorizationConfig& config = two_tenant_config()) {
    auto a = NamespaceAuthority::create(config, base_facts());
    INFO((a.ok() ? std::string("ok") : a.error().describe()));
    REQUIRE(a.ok());
    AuthorityFixture f{std::move(a).value(), {}};
    f.tokens = f.authority.take_issued_tokens();
    return f;
  }

  const BearerToken& token(const std::string& principal) const {
    for (const IssuedToken& t : tokens)
      if (t.principal_name == principal) return t.token;
    FAIL("no issued token for " << principal);
    return tokens.front().token;
  }

  PrincipalId principal(const std::string& name) const {
    auto id = authority.principal_id(name);
    REQUIRE(id.has_value());
    return *id;
  }

  AuthorizedLookup grant(const std::string& principal_name, const std::string& ns) {
    auto id = authority.authenticate(token(principal_name));
    REQUIRE(id.ok());
    auto g = authority.authorize(*id, ns);
    INFO((g.ok() ? std::string("ok") : g.error().describe()));
    REQUIRE(g.ok());
    return *g;
  }
};

// Successor facts for a purge: an adapter change (InvalidationCause::adapter).
inline GenerationFacts adapter_successor(const std::string& adapter = "lora-support-v2") {
  GenerationFacts f = base_facts();
  f.artifact.adapter_identity = adapter;
  return f;
}

inline PurgeRequest adapter_purge(bool cancel_leases = false) {
  PurgeRequest r;
  r.cause = InvalidationCause::adapter;
  r.successor = adapter_successor();
  r.cancel_live_leases = cancel_leases;
  r.physical_mode = PhysicalReleaseMode::overwrite;
  r.external_tiers = {"m5.5-directory"};
  return r;
}

}  // namespace kvrt::test
