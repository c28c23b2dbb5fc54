#pragma once
// An authorization owner as the node serves it, with one worker session and
// one admin session: the admin routes' tests (invalidation, purge) start
// here. Namespace d/a is at generation 4 with a fixed salt; d/b is a
// second namespace the worker may use, for "other namespaces are
// untouched".
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "services/authorization/authorization_service.hpp"
#include "tests/support/identity_fixtures.hpp"

namespace kvrt::test {

inline constexpr const char* kAdminTestConfig =
    "[[namespace]]\ndeployment = \"d\"\ntenant = \"a\"\nsalt = \"s\"\ngeneration = 4\n\n"
    "[[namespace]]\ndeployment = \"d\"\ntenant = \"b\"\n\n"
    "[[principal]]\nname = \"w\"\nnamespaces = [\"d/a\", \"d/b\"]\n\n"
    "[[principal]]\nname = \"op\"\nrole = \"admin\"\n";

struct AdminServed {
  AuthorizationService svc;
  SessionId worker;
  SessionId admin;
};

inline AdminServed serve_with_admin() {
  const AuthorizationConfig config = parse_authorization_config(kAdminTestConfig, "inline.toml").value();
  Result<NamespaceAuthority> authority = NamespaceAuthority::create(config, base_facts());
  REQUIRE(authority.ok());
  std::string worker_token, admin_token;
  for (const IssuedToken& t : authority->take_issued_tokens())
    (t.principal_name == "op" ? admin_token : worker_token) = t.token.reveal_hex();
  AuthorizationService svc(std::move(*authority), config);
  const OpenedSession w = svc.open_session(HelloRequest{worker_token, "w-1", 1}).value();
  const OpenedSession a = svc.open_session(HelloRequest{admin_token, "kvrt-admin", 1}).value();
  CHECK_FALSE(w.admin);
  CHECK(a.admin);
  return AdminServed{std::move(svc), w.session, a.session};
}

}  // namespace kvrt::test
