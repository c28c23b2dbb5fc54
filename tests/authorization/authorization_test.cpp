// The namespace / authorization owner (spec 0x01A "CacheIsolationNamespace",
// 0x0CE "Authorization Before Lookup"): tokens, grants, capabilities,
// principal revocation and holds.
#include <catch2/catch.hpp>
#include <set>

#include "tests/support/authorization_fixture.hpp"
#include "services/telemetry/metric_label_hygiene.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

// A rejected operation leaves the owner exactly as it was (0x04F), and the
// owner's invariants hold after every transition.
template <class Op>
Error rejected_unchanged(NamespaceAuthority& a, Op op) {
  const Sha256Digest before = a.state_digest();
  auto r = op();
  REQUIRE_FALSE(r.ok());
  CHECK(a.state_digest() == before);
  REQUIRE(a.validate().ok());
  return r.error();
}

}  // namespace

TEST_CASE("the node issues one 128-bit token per principal and keeps only its digest", "[authorization]") {
  auto f = AuthorityFixture::make();
  REQUIRE(f.tokens.size() == 3);
  std::set<std::string> hex;
  for (const IssuedToken& t : f.tokens) {
    CHECK(t.token.reveal_hex().size() == 32);
    hex.insert(t.token.reveal_hex());
    auto id = f.authority.authenticate(t.token);
    REQUIRE(id.ok());
    CHECK(*id == t.principal);
    CHECK(f.authority.principal_id(t.principal_name) == t.principal);
  }
  CHECK(hex.size() == 3);
  // Handed over once.
  CHECK(f.authority.take_issued_tokens().empty());
  // The raw token appears nowhere in the state the authority digests, and a
  // token is never an acceptable metric label value.
  for (const IssuedToken& t : f.tokens)
    CHECK_FALSE(validate_metric_labels(std::vector<MetricLabel>{{"worker", t.token.reveal_hex()}}).ok());
  REQUIRE(f.authority.validate().ok());
}

TEST_CASE("authentication rejects unknown and malformed tokens without quoting them", "[authorization]") {
  auto f = AuthorityFixture::make();
  auto bogus = BearerToken::generate();
  REQUIRE(bogus.ok());
  auto r = f.authority.authenticate(*bogus);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::authorization_unauthenticated);
  CHECK(r.error().reason.find(bogus->reveal_hex()) == std::string::npos);

  const std::string almost = f.token("worker-a").reveal_hex().substr(0, 31) + "z";
  auto m = f.authority.authenticate_hex(almost);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == ErrorCode::authorization_unauthenticated);
  CHECK(m.error().reason.find(almost.substr(0, 8)) == std::string::npos);
  CHECK(f.authority.authenticate_hex(f.token("worker-a").reveal_hex()).ok());
  CHECK_FALSE(f.authority.authenticate_hex("").ok());
}

TEST_CASE("a configured token digest authenticates the operator's token", "[authorization]") {
  auto token = BearerToken::from_hex("00112233445566778899aabbccddeeff");
  REQUIRE(token.ok());
  AuthorizationConfig c = two_tenant_config();
  c.principals[0].token_sha256 = token->digest();
  auto f = AuthorityFixture::make(c);
  CHECK(f.tokens.size() == 2);  // worker-a's token is the operator's, not issued
  auto id = f.authority.authenticate(*token);
  REQUIRE(id.ok());
  CHECK(*id == f.principal("worker-a"));
}

TEST_CASE("authorize answers the current generation, salt digest and a stable grant", "[authorization]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup a = f.grant("worker-a", kTenantA);
  CHECK(a.namespace_name() == kTenantA);
  CHECK(a.generation() == NamespaceGeneration{4});
  CHECK(a.salt_digest() == cache_salt_digest("b5f0c2d9e4a17733"));
  CHECK(a.namespace_id() == NamespaceId{0});
  CHECK(a.principal() == f.principal("worker-a"));
  CHECK(f.authority.check(a).ok());
  // The same principal and namespace reuse the live grant.
  const AuthorizedLookup again = f.grant("worker-a", kTenantA);
  CHECK(again == a);
  CHECK(f.authority.live_grants() == 1);
  // tenant-b's salt was drawn at start-up: 128 bits, distinct from tenant-a's.
  const AuthorizedLookup b = f.grant("worker-b", kTenantB);
  CHECK(b.salt_digest() != a.salt_digest());
  CHECK(f.authority.registry().current(kTenantB)->isolation.cache_salt.size() == 32);
  CHECK(b.grant_id() != a.grant_id());
  REQUIRE(f.authority.validate().ok());
}

TEST_CASE("authorization rejects cross-namespace, unknown and revoked requests, changing nothing", "[authorization]") {
  auto f = AuthorityFixture::make();
  const PrincipalId b = f.principal("worker-b");
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.authorize(b, kTenantA); }).code ==
        ErrorCode::authorization_namespace_denied);
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.authorize(b, "prod-eu1/tenant-z"); }).code ==
        ErrorCode::authorization_unknown_namespace);
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.authorize(PrincipalId{99}, kTenantB); }).code ==
        ErrorCode::authorization_unauthenticated);
  REQUIRE(f.authority.revoke_principal(b).ok());
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.authorize(b, kTenantB); }).code ==
        ErrorCode::authorization_principal_revoked);
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.authenticate(f.token("worker-b")); }).code ==
        ErrorCode::authorization_principal_revoked);
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.revoke_principal(b); }).code ==
        ErrorCode::authorization_principal_revoked);
}

TEST_CASE("a worker that disconnects ends every grant, its outstanding holds are listed", "[authorization]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup a = f.grant("worker-ab", kTenantA);
  const AuthorizedLookup b = f.grant("worker-ab", kTenantB);
  auto hold = f.authority.record_hold(a, HoldKind::lease, 501);
  REQUIRE(hold.ok());
  auto r = f.authority.end_principal_grants(f.principal("worker-ab"));
  REQUIRE(r.ok());
  CHECK(r->ended_grants == std::vector<GrantId>{a.grant_id(), b.grant_id()});
  CHECK(r->outstanding_holds == std::vector<HoldId>{*hold});
  CHECK_FALSE(r->token_barred);
  CHECK(f.authority.check(a).error().code == ErrorCode::authorization_grant_ended);
  CHECK(f.authority.check(b).error().code == ErrorCode::authorization_grant_ended);
  REQUIRE(f.authority.validate().ok());
  // The owner cancels the lease through its normal operation and reports it.
  REQUIRE(f.authority.release_hold(*hold).ok());
  CHECK(rejected_unchanged(f.authority, [&] { return f.authority.release_hold(*hold); }).code ==
        ErrorCode::authorization_unknown_hold);
  // A restarted worker authenticates again and gets a new grant id: the old
  // capability stays dead.
  const AuthorizedLookup again = f.grant("worker-ab", kTenantA);
  CHECK(again.grant_id() != a.grant_id());
  CHECK(f.authority.check(a).error().code == ErrorCode::authorization_grant_ended);
  REQUIRE(f.authority.validate().ok());
}

TEST_CASE("a grant value from the wire becomes a capability only if it matches a live grant", "[authorization]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup a = f.grant("worker-a", kTenantA);
  auto ok = f.authority.verify_claim(a.grant());
  REQUIRE(ok.ok());
  CHECK(*ok == a);

  NamespaceGrant forged = a.grant();
  forged.principal = f.principal("worker-b");  // worker-b claims worker-a's grant
  CHECK(f.authority.verify_claim(forged).error().code == ErrorCode::authorization_grant_ended);
  forged = a.grant();
  forged.grant_id = GrantId{a.grant_id().value + 100};
  CHECK(f.authority.verify_claim(forged).error().code == ErrorCode::authorization_grant_ended);
  forged = a.grant();
  forged.generation = NamespaceGeneration{5};
  CHECK(f.authority.verify_claim(forged).error().code == ErrorCode::authorization_stale_generation);
  forged = a.grant();
  forged.salt_digest = cache_salt_digest("guessed");
  CHECK(f.authority.verify_claim(forged).error().code == ErrorCode::authorization_grant_ended);
  forged = a.grant();
  forged.namespace_name = kTenantB;
  CHECK(f.authority.verify_claim(forged).error().code == ErrorCode::authorization_grant_ended);
}

TEST_CASE("holds are registry admissions of the grant's generation", "[authorization]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup a = f.grant("worker-a", kTenantA);
  auto h1 = f.authority.record_hold(a, HoldKind::lease, 7);
  auto h2 = f.authority.record_hold(a, HoldKind::executable_receipt, 8);
  REQUIRE((h1.ok() && h2.ok()));
  CHECK(f.authority.live_holds(kTenantA, NamespaceGeneration{4}, HoldKind::lease) == 1);
  CHECK(f.authority.live_holds(kTenantA, NamespaceGeneration{4}, HoldKind::executable_receipt) == 1);
  CHECK(f.authority.registry().current(kTenantA)->live_admissions.size() == 2);
  CHECK(f.authority.hold(*h1)->subject == 7);
  REQUIRE(f.authority.validate().ok());
  REQUIRE(f.authority.release_hold(*h1).ok());
  REQUIRE(f.authority.release_hold(*h2).ok());
  CHECK(f.authority.registry().current(kTenantA)->live_admissions.empty());
  REQUIRE(f.authority.validate().ok());
}
