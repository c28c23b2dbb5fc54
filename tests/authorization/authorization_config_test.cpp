// Loading the authorization owner's configuration from TOML ([[namespace]],
// [[principal]]): every mistake is a typed error naming file:line:column and
// the field, and nothing is started.
#include <catch2/catch.hpp>

#include "tests/support/authorization_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

const char* kGood = R"(# other sections of the node configuration are ignored
[node]
port = 0

[[namespace]]
deployment = "prod-eu1"
tenant = "tenant-a"
salt = "b5f0c2d9e4a17733"
generation = 4

[[namespace]]
deployment = "prod-eu1"
tenant = "tenant-b"
publication_policy = "private_to_request"

[[principal]]
name = "worker-a"
namespaces = ["prod-eu1/tenant-a"]
token_sha256 = "1f2b1e8b6c1d1a5b1ac1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607"

[[principal]]
name = "worker-ab"
namespaces = ["prod-eu1/tenant-a", "prod-eu1/tenant-b"]
)";

Error parse_error(const std::string& text) {
  auto c = parse_authorization_config(text, "node.toml");
  REQUIRE_FALSE(c.ok());
  return c.error();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a node configuration yields namespaces and principals", "[authorization][config]") {
  auto c = parse_authorization_config(kGood, "node.toml");
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  REQUIRE(c->namespaces.size() == 2);
  CHECK(c->namespaces[0].generation == 4);
  CHECK(c->namespaces[0].salt == std::optional<std::string>("b5f0c2d9e4a17733"));
  CHECK_FALSE(c->namespaces[1].salt.has_value());
  CHECK(c->namespaces[1].publication_policy == PublicationPolicy::private_to_request);
  CHECK(c->namespaces[1].generation == 1);
  REQUIRE(c->principals.size() == 2);
  CHECK(c->principals[0].token_sha256.has_value());
  CHECK_FALSE(c->principals[1].token_sha256.has_value());
  CHECK(c->principals[1].namespaces == std::vector<std::string>{kTenantA, kTenantB});
  REQUIRE(c->validate().ok());

  auto a = NamespaceAuthority::create(*c, base_facts());
  REQUIRE(a.ok());
  CHECK(a->take_issued_tokens().size() == 1);  // worker-ab only
  CHECK(a->registry().current(kTenantB)->isolation.publication_policy == PublicationPolicy::private_to_request);
  REQUIRE(a->validate().ok());
}

TEST_CASE("configuration errors name file, line, column and field", "[authorization][config]") {
  struct Case {
    const char* what;
    std::string text;
    std::string location;  // "node.toml:line:col"
    std::string field;
  };
  const std::vector<Case> cases{
      {"unknown namespace in a principal's list",
       replace(kGood, "[\"prod-eu1/tenant-a\"]\ntoken", "[\"prod-eu1/tenant-c\"]\ntoken"), "node.toml:18:15",
       "principal[0].namespaces[0]"},
      {"namespace listed twice",
       replace(kGood, "\"prod-eu1/tenant-a\", \"prod-eu1/tenant-b\"", "\"prod-eu1/tenant-a\", \"prod-eu1/tenant-a\""),
       "node.toml:23:36", "principal[1].namespaces[1]"},
      {"malformed token digest", replace(kGood, "1f2b1e8b", "zz2b1e8b"), "node.toml:19:16",
       "principal[0].token_sha256"},
      {"empty salt", replace(kGood, "salt = \"b5f0c2d9e4a17733\"", "salt = \"\""), "node.toml:8:8",
       "namespace[0].salt"},
      {"unknown publication policy", replace(kGood, "private_to_request", "public"), "node.toml:14:22",
       "namespace[1].publication_policy"},
      {"generation 0", replace(kGood, "generation = 4", "generation = 0"), "node.toml:9:14", "namespace[0].generation"},
      {"slash in a tenant", replace(kGood, "tenant = \"tenant-b\"", "tenant = \"tenant/b\""), "node.toml:13:10",
       "namespace[1].tenant"},
      {"duplicate principal", replace(kGood, "name = \"worker-ab\"", "name = \"worker-a\""), "node.toml:22:8",
       "principal[1].name"},
      {"principal name with a space", replace(kGood, "name = \"worker-ab\"", "name = \"worker ab\""), "node.toml:22:8",
       "principal[1].name"},
      {"missing tenant", replace(kGood, "tenant = \"tenant-b\"\n", ""), "node.toml:11:1", "namespace[1].tenant"},
      {"namespace is not a table array", "namespace = 3\n", "node.toml:1:13", "namespace"},
      {"unknown role", replace(kGood, "name = \"worker-ab\"\n", "name = \"worker-ab\"\nrole = \"root\"\n"),
       "node.toml:23:8", "principal[1].role"},
      {"an admin with namespaces", replace(kGood, "name = \"worker-ab\"\n", "name = \"worker-ab\"\nrole = \"admin\"\n"),
       "node.toml:24:14", "principal[1].namespaces"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const Error e = parse_error(c.text);
    INFO(e.describe());
    CHECK(e.code == ErrorCode::config_field);
    CHECK(e.field == c.field);
    CHECK(e.reason.rfind(c.location + ":", 0) == 0);
  }
  const Error syntax = parse_error("[[namespace]\n");
  CHECK(syntax.code == ErrorCode::config_parse);
  CHECK(syntax.reason.rfind("node.toml:1:", 0) == 0);
  auto missing = load_authorization_config("/nonexistent/node.toml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
}

TEST_CASE("configs built in code obey the loader's rules", "[authorization][config]") {
  AuthorizationConfig c = two_tenant_config();
  REQUIRE(c.validate().ok());
  c.principals[2].namespaces.push_back("prod-eu1/tenant-z");
  auto e = c.validate();
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().field == "principal[2].namespaces[2]");
  c = two_tenant_config();
  c.namespaces[1].tenant = "tenant-a";
  CHECK(c.validate().error().field == "namespace[1]");
  c = two_tenant_config();
  auto t = BearerToken::generate();
  REQUIRE(t.ok());
  c.principals[0].token_sha256 = t->digest();
  c.principals[1].token_sha256 = t->digest();
  CHECK(c.validate().error().field == "principal[1].token_sha256");
  CHECK_FALSE(NamespaceAuthority::create(c, base_facts()).ok());
}

TEST_CASE("the authorization section of config/node.toml loads", "[authorization][config]") {
  const std::string path = std::string(KVRT_SOURCE_DIR) + "/config/node.toml";
  auto c = load_authorization_config(path);
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  CHECK_FALSE(c->namespaces.empty());
  CHECK_FALSE(c->principals.empty());
  auto a = NamespaceAuthority::create(*c, base_facts());
  REQUIRE(a.ok());
  REQUIRE(a->validate().ok());
}

TEST_CASE("an admin principal has no namespaces and a role of its own", "[authorization][config]") {
  auto c = parse_authorization_config(std::string(kGood) + "\n[[principal]]\nname = \"operator\"\nrole = \"admin\"\n",
                                      "node.toml");
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  REQUIRE(c->principals.size() == 3);
  CHECK(c->principals[0].role == PrincipalRole::worker);
  CHECK(c->principals[2].role == PrincipalRole::admin);
  CHECK(c->principals[2].namespaces.empty());
  // The same rule for a config built in code.
  AuthorizationConfig built = *c;
  built.principals[2].namespaces = {"prod-eu1/tenant-a"};
  const Status s = built.validate();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().field == "principal[2].namespaces");
}

TEST_CASE("trust domains and block quotas load, and their mistakes name the field", "[authorization][config][quota]") {
  const std::string domains = R"([[domain]]
name = "alpha"
quota_blocks = 64

[[domain]]
name = "beta"

)";
  const std::string text =
      replace(replace(domains + kGood, "generation = 4\n", "generation = 4\ndomain = \"alpha\"\nquota_blocks = 32\n"),
              "publication_policy = \"private_to_request\"\n",
              "publication_policy = \"private_to_request\"\ndomain = \"beta\"\n");
  auto c = parse_authorization_config(text, "node.toml");
  INFO((c.ok() ? std::string("ok") : c.error().describe()));
  REQUIRE(c.ok());
  REQUIRE(c->domains.size() == 2);
  CHECK(c->domains[0].name == "alpha");
  CHECK(c->domains[0].quota_blocks == std::optional<uint32_t>(64));
  CHECK_FALSE(c->domains[1].quota_blocks.has_value());
  CHECK(c->namespaces[0].domain == std::optional<std::string>("alpha"));
  CHECK(c->namespaces[0].quota_blocks == std::optional<uint32_t>(32));
  CHECK(c->namespaces[1].domain == std::optional<std::string>("beta"));
  CHECK_FALSE(c->namespaces[1].quota_blocks.has_value());
  CHECK(c->namespaces[0].name() == "prod-eu1/tenant-a");
  CHECK(c->validate().ok());

  struct Case {
    std::string text;
    std::string field;
  };
  const std::vector<Case> cases{
      {replace(text, "domain = \"beta\"\n", "domain = \"gamma\"\n"), "namespace[1].domain"},
      {replace(text, "quota_blocks = 32\n", "quota_blocks = 0\n"), "namespace[0].quota_blocks"},
      {replace(text, "quota_blocks = 64\n", "quota_blocks = -1\n"), "domain[0].quota_blocks"},
      {replace(text, "name = \"beta\"\n", "name = \"alpha\"\n"), "domain[1].name"},
      {replace(text, "name = \"beta\"\n", "name = \"no spaces\"\n"), "domain[1].name"},
  };
  for (const Case& k : cases) {
    INFO(k.field);
    const Error e = parse_error(k.text);
    CHECK(e.code == ErrorCode::config_field);
    CHECK(e.field == k.field);
  }
  // The same rules for a configuration built in code.
  AuthorizationConfig built = *c;
  built.namespaces[1].domain = "gamma";
  CHECK(built.validate().error().field == "namespace[1].domain");
  built = *c;
  built.domains[1].quota_blocks = 0;
  CHECK(built.validate().error().field == "domain[1].quota_blocks");
}
