// The authorization owner's pool_descriptors route (unnamed pool segments):
// which sessions may receive the node's pool descriptors. Only a worker
// session whose principal is allowed a namespace; an admin never (operators
// hold no K/V); a principal allowed nothing never; an ended session never;
// and a node whose segments have names says so instead of answering nothing.
#include <catch2/catch.hpp>

#include "services/authorization/authorization_service.hpp"
#include "tests/support/identity_fixtures.hpp"

namespace kvrt::test {

TEST_CASE("pool_descriptors: worker sessions allowed a namespace only", "[authorization][isolation]") {
  const AuthorizationConfig config = parse_authorization_config(
                                         "[[namespace]]\ndeployment = \"d\"\ntenant = \"a\"\n\n"
                                         "[[principal]]\nname = \"w\"\nnamespaces = [\"d/a\"]\n\n"
                                         "[[principal]]\nname = \"idle\"\nnamespaces = []\n\n"
                                         "[[principal]]\nname = \"op\"\nrole = \"admin\"\n",
                                         "inline.toml")
                                         .value();
  Result<NamespaceAuthority> authority = NamespaceAuthority::create(config, base_facts());
  REQUIRE(authority.ok());
  std::map<std::string, std::string> tokens;
  for (const IssuedToken& t : authority->take_issued_tokens()) tokens[t.principal_name] = t.token.reveal_hex();
  AuthorizationService svc(std::move(*authority), config);
  const SessionId worker = svc.open_session(HelloRequest{tokens["w"], "w-1", 1}).value().session;
  const SessionId idle = svc.open_session(HelloRequest{tokens["idle"], "i-1", 1}).value().session;
  const SessionId admin = svc.open_session(HelloRequest{tokens["op"], "kvrt-admin", 1}).value().session;
  const auto refusal = [&](SessionId s) {
    Result<PoolDescriptorReceipt> r = svc.apply(s, PoolDescriptorRequest{});
    REQUIRE_FALSE(r.ok());
    return r.error();
  };

  // Named segments: nothing to hand over, and the refusal says why.
  CHECK(refusal(worker).field == "pool_segments");

  std::vector<PoolAttachment> pools;
  for (uint32_t g = 0; g < 2; ++g) {
    PoolAttachment p{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{3}, "", 4096};
    p.by_descriptor = true;
    pools.push_back(p);
  }
  svc.serve_pool_descriptors({pools}, TrustDomainPlan::shared());
  Result<PoolDescriptorReceipt> served = svc.apply(worker, PoolDescriptorRequest{});
  REQUIRE(served.ok());
  REQUIRE(served->pools.size() == 2);
  CHECK(served->pools[1].pool == PoolId{2});
  CHECK(served->pools[1].by_descriptor);

  CHECK(refusal(admin).code == ErrorCode::authorization_route_denied);
  CHECK(refusal(idle).code == ErrorCode::authorization_namespace_denied);
  CHECK(refusal(SessionId{999}).code == ErrorCode::session_ended);
  REQUIRE(svc.end_session(worker).ok());
  CHECK(refusal(worker).code == ErrorCode::session_ended);

  const OwnerStats stats = svc.stats();
  const auto value = [&](const std::string& name) {
    for (const StatValue& v : stats.values)
      if (v.name == name) return v.value;
    FAIL("no statistic " << name);
    return int64_t{-1};
  };
  CHECK(value("pool_descriptors_served") == 1);
  CHECK(value("pool_descriptors_refused") == 5);
  CHECK(svc.validate().ok());
}

}  // namespace kvrt::test
