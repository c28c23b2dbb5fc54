// A live node's invalidation as the authorization owner serves it (0x01A,
// 0x0CE): only an admin session may invalidate or read namespace standing; a
// refused invalidation changes nothing (state digest, generation, grants); an
// accepted one makes the successor current, ends the old generation's grants
// so that a worker's next reuse step is refused as stale, and lets the worker
// authorize again at the new generation. Expected values are derived from the
// configuration (generation 4 + 1, the grants the test issued), not read
// back from the owner.
#include <catch2/catch.hpp>

#include "tests/services/admin_session_fixture.hpp"

namespace kvrt::test {
namespace {

NamespaceInvalidateRequest adapter_swap(const std::string& ns, const std::string& adapter) {
  return NamespaceInvalidateRequest{{}, ns, InvalidationCause::adapter, adapter};
}

bool stale(const ReuseKeyAnswer& a) {
  const auto* d = std::get_if<AuthorizationDenied>(&a.authorization);
  return d != nullptr && d->error.code == ErrorCode::authorization_stale_generation;
}

}  // namespace

TEST_CASE("an invalidation makes the successor current and ends the old generation's grants",
          "[node][services][authorization][invalidation]") {
  AdminServed s = serve_with_admin();
  const NamespaceGrantReceipt g4 = s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/a"}).value().receipt;
  REQUIRE(g4.generation.value == 4);
  const ReuseKeyRequest key{"d/a", {TokenId{1}, TokenId{2}}};
  REQUIRE(std::holds_alternative<AuthorizedLookup>(s.svc.reuse_key(s.worker, key).authorization));
  (void)s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/b"}).value();

  Result<NamespaceInvalidationReceipt> r = s.svc.apply(s.admin, adapter_swap("d/a", "lora-v2"));
  INFO((r.ok() ? std::string("ok") : r.error().describe()));
  REQUIRE(r.ok());
  CHECK(r->namespace_name == "d/a");
  CHECK(r->old_generation.value == 4);
  CHECK(r->new_generation.value == 5);
  CHECK(r->changed_facts == std::vector<std::string>{"adapter_identity"});
  CHECK(r->ended_grants == 1);  // d/a's; d/b's grant is another namespace's
  CHECK(r->old_reclaimed);      // nobody held generation 4
  CHECK(r->old_namespace_sha256 != r->new_namespace_sha256);
  REQUIRE(s.svc.validate().ok());

  // The worker's grant of generation 4 is refused as stale, not as missing.
  CHECK(stale(s.svc.reuse_key(s.worker, key)));
  // d/b is untouched.
  CHECK(std::holds_alternative<AuthorizedLookup>(
      s.svc.reuse_key(s.worker, ReuseKeyRequest{"d/b", {TokenId{1}}}).authorization));
  // Authorizing again grants generation 5, and reuse works on it.
  const NamespaceGrantReceipt g5 = s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/a"}).value().receipt;
  CHECK(g5.generation.value == 5);
  CHECK(std::holds_alternative<AuthorizedLookup>(s.svc.reuse_key(s.worker, key).authorization));

  const NamespaceStatusReceipt st = s.svc.apply(s.admin, NamespaceStatusRequest{{}, ""}).value();
  REQUIRE(st.namespaces.size() == 2);
  CHECK(st.namespaces[0].namespace_name == "d/a");
  CHECK(st.namespaces[0].generation.value == 5);
  CHECK(st.namespaces[0].invalidations == 1);
  CHECK(st.namespaces[0].last_cause == "adapter");
  CHECK(st.namespaces[0].live_grants == 1);
  CHECK(st.namespaces[0].admitting);
  CHECK(st.namespaces[1].namespace_name == "d/b");
  CHECK(st.namespaces[1].generation.value == 1);
  CHECK(st.namespaces[1].invalidations == 0);
  CHECK(st.namespaces[1].last_cause.empty());

  const OwnerStats stats = s.svc.stats();
  auto stat = [&](const std::string& name) {
    for (const StatValue& v : stats.values)
      if (v.name == name) return v.value;
    FAIL("no stat " << name);
    return int64_t{-1};
  };
  CHECK(stat("invalidations") == 1);
  CHECK(stat("grants_ended_by_invalidation") == 1);
  CHECK(stat("stale_generation_refusals") == 1);
}

TEST_CASE("a weights invalidation moves the model generation, positions need a digest",
          "[node][services][authorization][invalidation]") {
  AdminServed s = serve_with_admin();
  const uint64_t m0 = base_facts().layout.model_generation;
  auto weights = [&](const std::string& identity) {
    return s.svc.apply(s.admin, NamespaceInvalidateRequest{{}, "d/b", InvalidationCause::weights, identity});
  };
  Result<NamespaceInvalidationReceipt> next = weights("");
  REQUIRE(next.ok());
  CHECK(next->old_model_generation == m0);
  CHECK(next->new_model_generation == m0 + 1);
  CHECK(next->new_generation.value == 2);
  Result<NamespaceInvalidationReceipt> named = weights(std::to_string(m0 + 10));
  REQUIRE(named.ok());
  CHECK(named->new_model_generation == m0 + 10);
  CHECK(named->new_generation.value == 3);
  const std::string hex64(64, 'c');
  Result<NamespaceInvalidationReceipt> pos =
      s.svc.apply(s.admin, NamespaceInvalidateRequest{{}, "d/b", InvalidationCause::positions, hex64});
  INFO((pos.ok() ? std::string("ok") : pos.error().describe()));
  REQUIRE(pos.ok());
  CHECK(pos->changed_facts == std::vector<std::string>{"position_contract_sha256"});
}

TEST_CASE("a refused invalidation names its reason and changes nothing",
          "[node][services][authorization][invalidation]") {
  AdminServed s = serve_with_admin();
  (void)s.svc.authorize(s.worker, AuthorizeRequest{{}, "d/a"}).value();
  const uint64_t m0 = base_facts().layout.model_generation;
  struct Case {
    SessionId session;
    NamespaceInvalidateRequest request;
    ErrorCode code;
    std::string field;
  };
  const std::vector<Case> cases{
      {s.worker, adapter_swap("d/a", "lora-v2"), ErrorCode::authorization_route_denied, "session"},
      {SessionId{999}, adapter_swap("d/a", "lora-v2"), ErrorCode::session_ended, "session"},
      {s.admin, adapter_swap("d/zzz", "lora-v2"), ErrorCode::authorization_unknown_namespace, "namespace_name"},
      {s.admin, adapter_swap("d/a", ""), ErrorCode::invalid_argument, "successor_identity"},
      // The same adapter as now: the cause changes nothing it owns.
      {s.admin, adapter_swap("d/a", base_facts().artifact.adapter_identity), ErrorCode::invalid_argument, ""},
      {s.admin,
       {{}, "d/a", InvalidationCause::weights, std::to_string(m0)},
       ErrorCode::invalid_argument,
       "successor_identity"},
      {s.admin, {{}, "d/a", InvalidationCause::weights, "12x"}, ErrorCode::invalid_argument, "successor_identity"},
      {s.admin, {{}, "d/a", InvalidationCause::positions, "ABC"}, ErrorCode::invalid_argument, "successor_identity"},
      {s.admin, {{}, "d/a", InvalidationCause::representation, "bf16"}, ErrorCode::invalid_argument, "cause"},
      {s.admin, {{}, "d/a", InvalidationCause::shard, "tp4"}, ErrorCode::invalid_argument, "cause"},
  };
  const Sha256Digest before = s.svc.authority().state_digest();
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    Result<NamespaceInvalidationReceipt> r = s.svc.apply(cases[i].session, cases[i].request);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == cases[i].code);
    if (!cases[i].field.empty()) CHECK(r.error().field == cases[i].field);
    CHECK_FALSE(r.error().reason.empty());
    CHECK(s.svc.authority().state_digest() == before);
  }
  CHECK(s.svc.authority().live_grants() == 1);
  REQUIRE(s.svc.validate().ok());
  // Status is an admin's too.
  CHECK(s.svc.apply(s.worker, NamespaceStatusRequest{{}, ""}).error().code == ErrorCode::authorization_route_denied);
  CHECK(s.svc.apply(s.admin, NamespaceStatusRequest{{}, "d/zzz"}).error().code ==
        ErrorCode::authorization_unknown_namespace);
}

TEST_CASE("a generation someone still holds stays frozen after an invalidation",
          "[node][services][authorization][invalidation]") {
  const AuthorizationConfig config = parse_authorization_config(kAdminTestConfig, "inline.toml").value();
  Result<NamespaceAuthority> made = NamespaceAuthority::create(config, base_facts());
  REQUIRE(made.ok());
  NamespaceAuthority a = std::move(made).value();
  std::string token;
  for (const IssuedToken& t : a.take_issued_tokens())
    if (t.principal_name == "w") token = t.token.reveal_hex();
  const PrincipalId w = *a.principal_id("w");
  const AuthorizedLookup g = a.authorize(w, "d/a").value();
  const HoldId hold = a.record_hold(g, HoldKind::lease, 7).value();
  const NamespaceInvalidation inv = a.invalidate("d/a", InvalidationCause::adapter,
                                                 [] {
                                                   GenerationFacts f = base_facts();
                                                   f.artifact.adapter_identity = "lora-v2";
                                                   return f;
                                                 }())
                                        .value();
  CHECK_FALSE(inv.receipt.old_reclaimed);
  CHECK(inv.receipt.old_live_admissions == 1);
  NamespaceStanding st = a.standing("d/a").value();
  CHECK(st.frozen_generations == std::vector<NamespaceGeneration>{NamespaceGeneration{4}});
  CHECK(st.lease_holds == 1);
  REQUIRE(a.validate().ok());
  REQUIRE(a.release_hold(hold).ok());
  st = a.standing("d/a").value();
  CHECK(st.frozen_generations.empty());
  CHECK(st.lease_holds == 0);
  REQUIRE(a.validate().ok());
}

}  // namespace kvrt::test
