// Loop 11 negative fixtures of spec 0x0CE (security isolation is part of
// exactness) and 0x0CG (fallback may lose reuse, never weaken identity): each
// named case must be refused by the owner that owns the contract, with a
// typed error or a funnel rejection, never a silent hit. The spec's fixture
// table was lost; the cases are rebuilt from the 0x0CE and 0x0CD text.
#include <catch2/catch.hpp>

#include "tests/reuse/reuse_fixture.hpp"
#include "services/telemetry/metric_label_hygiene.hpp"

using namespace kvrt;
using namespace kvrt::test;

TEST_CASE("0x0CE negative fixtures are all refused", "[authorization][reuse][telemetry][negative]") {
  auto f = AuthorityFixture::make();
  const AuthorizedLookup a = f.grant("worker-a", kTenantA);
  const ReuseScenario happy = happy_scenario(f.authority, a);
  size_t refused = 0;
  auto rejected_at = [&](ReuseScenario s, RejectionReason reason) {
    DriveResult d = drive(s);
    REQUIRE(d.rejection.has_value());
    CHECK(d.rejection->reason == reason);
    ++refused;
  };

  {
    INFO("lookup_before_authorization: the transaction refuses a lookup as its first step");
    auto attempt = ReuseAttempt::begin(happy.request);
    REQUIRE(attempt.ok());
    CHECK(attempt->lookup(happy.candidate).error().code == ErrorCode::reuse_step_out_of_order);
    ++refused;
  }
  {
    INFO("cross_tenant_authorization: worker-b may not use tenant-a");
    ReuseScenario s = happy;
    s.authorization = AuthorizationDenied{f.authority.authorize(f.principal("worker-b"), kTenantA).error()};
    rejected_at(s, RejectionReason::namespace_denied);
  }
  {
    INFO("cross_tenant_candidate: the index proposes tenant-b's entry for an exact token match");
    ReuseScenario s = happy;
    s.hit().namespace_name = kTenantB;
    rejected_at(s, RejectionReason::isolation_mismatch);
  }
  {
    INFO("wrong_salt_key: a key built with another namespace's salt");
    ReuseScenario s = happy;
    s.key.manifest.cache_salt = f.authority.registry().current(kTenantB)->isolation.cache_salt;
    rejected_at(s, RejectionReason::cross_namespace_key);
  }
  {
    INFO("unauthenticated_token: a guessed token");
    auto guessed = BearerToken::generate();
    REQUIRE(guessed.ok());
    CHECK(f.authority.authenticate(*guessed).error().code == ErrorCode::authorization_unauthenticated);
    ++refused;
  }
  {
    INFO("forged_grant: a grant value naming another principal");
    NamespaceGrant g = a.grant();
    g.principal = f.principal("worker-b");
    CHECK_FALSE(f.authority.verify_claim(g).ok());
    ++refused;
  }
  {
    INFO("stale_namespace_generation_after_purge: an old grant and an old candidate after g -> g+1");
    auto other = AuthorityFixture::make();
    const AuthorizedLookup old = other.grant("worker-a", kTenantA);
    auto s1 = other.authority.begin_purge(kTenantA, adapter_purge());
    REQUIRE(s1.ok());
    REQUIRE(other.authority.advance_purge(s1->purge).ok());
    CHECK(other.authority.check(old).error().code == ErrorCode::authorization_stale_generation);
    const AuthorizedLookup fresh = other.grant("worker-a", kTenantA);
    ReuseScenario s = happy_scenario(other.authority, fresh);
    s.hit().namespace_generation = old.generation();
    rejected_at(s, RejectionReason::stale_candidate_generation);
  }
  {
    INFO("purge_completion_with_live_receipt: step 7 waits for every executable receipt of g");
    auto other = AuthorityFixture::make();
    const AuthorizedLookup old = other.grant("worker-a", kTenantA);
    auto receipt = other.authority.record_hold(old, HoldKind::executable_receipt, 1);
    REQUIRE(receipt.ok());
    PurgeRequest req = adapter_purge();
    req.index_owners.clear();
    req.physical_owners.clear();
    req.external_tiers.clear();
    auto s1 = other.authority.begin_purge(kTenantA, req);
    REQUIRE(s1.ok());
    for (int step = 2; step <= 6; ++step) REQUIRE(other.authority.advance_purge(s1->purge).ok());
    CHECK(other.authority.advance_purge(s1->purge).error().code == ErrorCode::authorization_purge_pending);
    ++refused;
  }
  {
    INFO("revoked_principal: a dead worker's capability");
    auto other = AuthorityFixture::make();
    const AuthorizedLookup g = other.grant("worker-b", kTenantB);
    REQUIRE(other.authority.revoke_principal(g.principal()).ok());
    CHECK(other.authority.check(g).error().code == ErrorCode::authorization_principal_revoked);
    ++refused;
  }
  {
    INFO("raw_prompt_in_metrics");
    CHECK(validate_metric_labels(std::vector<MetricLabel>{{"request", "tell me about my diagnosis"}}).error().reason ==
          "raw_prompt_in_metrics");
    ++refused;
  }
  {
    INFO("unsalted_cache_key_in_metrics");
    CHECK(validate_metric_labels(std::vector<MetricLabel>{{"block", sha256("key").hex()}}).error().reason ==
          "unsalted_cache_key_in_metrics");
    ++refused;
  }
  CHECK(refused == 11);
}
