#include "services/authorization/authorization_config.hpp"

#include <set>

#include "services/common/toml_reader.hpp"
#include "services/identity/isolation_namespace.hpp"

namespace kvrt {
namespace {

std::optional<PublicationPolicy> policy_from_string(std::string_view s) {
  if (s == "private_to_request") return PublicationPolicy::private_to_request;
  if (s == "tenant_shared") return PublicationPolicy::tenant_shared;
  if (s == "deployment_shared") return PublicationPolicy::deployment_shared;
  return std::nullopt;
}

bool valid_principal_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

// The TOML key of a CacheIsolationNamespace field validate_isolation_namespace names.
std::string config_key_of(const std::string& isolation_field) {
  if (isolation_field == "deployment_namespace") return "deployment";
  if (isolation_field == "tenant_id") return "tenant";
  return isolation_field;
}

CacheIsolationNamespace as_isolation(const NamespaceConfig& n) {
  CacheIsolationNamespace ns;
  ns.deployment_namespace = n.deployment;
  ns.tenant_id = n.tenant;
  ns.generation = NamespaceGeneration{n.generation};
  ns.publication_policy = n.publication_policy;
  return ns;
}

// The table array `key` of the root: absent is an empty list, anything other
// than an array of tables is a field error.
Result<std::vector<const toml::table*>> table_array(const TomlReader& r, const char* key) {
  std::vector<const toml::table*> out;
  const toml::node* node = r.root().get(key);
  if (node == nullptr) return out;
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return r.field_error(node, "", key, std::string("must be an array of tables ([[") + key + "]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = arr->get(i)->as_table();
    if (t == nullptr)
      return r.field_error(arr->get(i), "", std::string(key) + "[" + std::to_string(i) + "]", "must be a table");
    out.push_back(t);
  }
  return out;
}

}  // namespace

std::string NamespaceConfig::name() const { return namespace_name(as_isolation(*this)); }

Status AuthorizationConfig::validate() const {
  std::set<std::string, std::less<>> domain_names;
  for (size_t i = 0; i < domains.size(); ++i) {
    const std::string where = "domain[" + std::to_string(i) + "]";
    if (!valid_principal_name(domains[i].name))
      return make_error(ErrorCode::config_field, "a domain name is 1..64 characters of [A-Za-z0-9._-]",
                        where + ".name");
    if (!domain_names.insert(domains[i].name).second)
      return make_error(ErrorCode::config_field, "domain \"" + domains[i].name + "\" is configured twice",
                        where + ".name");
    if (domains[i].quota_blocks && *domains[i].quota_blocks == 0)
      return make_error(ErrorCode::config_field, "a quota is at least one block", where + ".quota_blocks");
  }
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < namespaces.size(); ++i) {
    const std::string where = "namespace[" + std::to_string(i) + "]";
    if (namespaces[i].domain && !domain_names.contains(*namespaces[i].domain))
      return make_error(ErrorCode::config_field, "domain \"" + *namespaces[i].domain + "\" is not configured",
                        where + ".domain");
    if (namespaces[i].quota_blocks && *namespaces[i].quota_blocks == 0)
      return make_error(ErrorCode::config_field, "a quota is at least one block", where + ".quota_blocks");
    Status s = validate_isolation_namespace(as_isolation(namespaces[i]));
    if (!s.ok())
      return make_error(ErrorCode::config_field, s.error().reason, where + "." + config_key_of(s.error().field));
    if (namespaces[i].generation == 0)
      return make_error(ErrorCode::config_field, "namespace generation starts at 1", where + ".generation");
    if (namespaces[i].salt && namespaces[i].salt->empty())
      return make_error(ErrorCode::config_field, "an explicit salt must not be empty (omit it to draw one)",
                        where + ".salt");
    if (!names.insert(namespace_name(as_isolation(namespaces[i]))).second)
      return make_error(ErrorCode::config_field,
                        "namespace \"" + namespace_name(as_isolation(namespaces[i])) + "\" is configured twice", where);
  }
  std::set<std::string, std::less<>> principal_names;
  std::set<Sha256Digest> digests;
  for (size_t i = 0; i < principals.size(); ++i) {
    const PrincipalConfig& p = principals[i];
    const std::string where = "principal[" + std::to_string(i) + "]";
    if (!valid_principal_name(p.name))
      return make_error(ErrorCode::config_field, "a principal name is 1..64 characters of [A-Za-z0-9._-]",
                        where + ".name");
    if (!principal_names.insert(p.name).second)
      return make_error(ErrorCode::config_field, "principal \"" + p.name + "\" is configured twice", where + ".name");
    if (p.token_sha256 && !digests.insert(*p.token_sha256).second)
      return make_error(ErrorCode::config_field, "two principals share one token digest", where + ".token_sha256");
    if (p.role == PrincipalRole::admin && !p.namespaces.empty())
      return make_error(ErrorCode::config_field, "an admin principal uses no namespace", where + ".namespaces");
    std::set<std::string, std::less<>> seen;
    for (size_t j = 0; j < p.namespaces.size(); ++j) {
      const std::string field = where + ".namespaces[" + std::to_string(j) + "]";
      if (!names.contains(p.namespaces[j]))
        return make_error(ErrorCode::config_field, "namespace \"" + p.namespaces[j] + "\" is not configured", field);
      if (!seen.insert(p.namespaces[j]).second)
        return make_error(ErrorCode::config_field, "namespace \"" + p.namespaces[j] + "\" is listed twice", field);
    }
  }
  return Status::success();
}

// An optional quota: absent is none, otherwise 1..2^31 blocks.
Result<std::optional<uint32_t>> read_quota(const TomlReader& r, const toml::table& t, const std::string& where) {
  if (t.get("quota_blocks") == nullptr) return std::optional<uint32_t>{};
  int64_t quota = 0;
  KVRT_TRY_ASSIGN(quota, r.integer(t, where, "quota_blocks", std::nullopt, 1, int64_t{1} << 31));
  return std::optional<uint32_t>{static_cast<uint32_t>(quota)};
}

Result<AuthorizationConfig> read_authorization_config(const TomlReader& r) {
  AuthorizationConfig c;
  std::vector<const toml::table*> tables;
  KVRT_TRY_ASSIGN(tables, table_array(r, "domain"));
  std::set<std::string, std::less<>> domain_names;
  for (size_t i = 0; i < tables.size(); ++i) {
    const toml::table& t = *tables[i];
    const std::string where = "domain[" + std::to_string(i) + "]";
    DomainConfig d;
    KVRT_TRY_ASSIGN(d.name, r.string(t, where, "name"));
    if (!valid_principal_name(d.name))
      return r.field_error(t.get("name"), where, "name", "must be 1..64 characters of [A-Za-z0-9._-]");
    if (!domain_names.insert(d.name).second)
      return r.field_error(t.get("name"), where, "name", "domain \"" + d.name + "\" is configured twice");
    KVRT_TRY_ASSIGN(d.quota_blocks, read_quota(r, t, where));
    c.domains.push_back(std::move(d));
  }

  KVRT_TRY_ASSIGN(tables, table_array(r, "namespace"));
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < tables.size(); ++i) {
    const toml::table& t = *tables[i];
    const std::string where = "namespace[" + std::to_string(i) + "]";
    NamespaceConfig n;
    KVRT_TRY_ASSIGN(n.deployment, r.string(t, where, "deployment"));
    KVRT_TRY_ASSIGN(n.tenant, r.string(t, where, "tenant"));
    if (t.get("salt") != nullptr) {
      std::string salt;
      KVRT_TRY_ASSIGN(salt, r.string(t, where, "salt"));
      if (salt.empty()) return r.field_error(t.get("salt"), where, "salt", "must not be empty (omit it to draw one)");
      n.salt = std::move(salt);
    }
    std::string policy;
    KVRT_TRY_ASSIGN(policy, r.string(t, where, "publication_policy", "tenant_shared"));
    auto p = policy_from_string(policy);
    if (!p)
      return r.field_error(
          t.get("publication_policy"), where, "publication_policy",
          "unknown value \"" + policy + "\"; expected private_to_request, tenant_shared, deployment_shared");
    n.publication_policy = *p;
    int64_t generation = 0;
    KVRT_TRY_ASSIGN(generation, r.integer(t, where, "generation", 1, 1));
    n.generation = static_cast<uint64_t>(generation);
    if (t.get("domain") != nullptr) {
      std::string domain;
      KVRT_TRY_ASSIGN(domain, r.string(t, where, "domain"));
      if (!domain_names.contains(domain))
        return r.field_error(t.get("domain"), where, "domain",
                             "domain \"" + domain + "\" is not configured (declare it with [[domain]])");
      n.domain = std::move(domain);
    }
    KVRT_TRY_ASSIGN(n.quota_blocks, read_quota(r, t, where));
    Status s = validate_isolation_namespace(as_isolation(n));
    if (!s.ok()) {
      const std::string key = config_key_of(s.error().field);
      return r.field_error(t.get(key), where, key, s.error().reason);
    }
    if (!names.insert(namespace_name(as_isolation(n))).second)
      return r.field_error(&t, where, "tenant",
                           "namespace \"" + namespace_name(as_isolation(n)) + "\" is configured twice");
    c.namespaces.push_back(std::move(n));
  }

  KVRT_TRY_ASSIGN(tables, table_array(r, "principal"));
  std::set<std::string, std::less<>> principal_names;
  std::set<Sha256Digest> digests;
  for (size_t i = 0; i < tables.size(); ++i) {
    const toml::table& t = *tables[i];
    const std::string where = "principal[" + std::to_string(i) + "]";
    PrincipalConfig p;
    KVRT_TRY_ASSIGN(p.name, r.string(t, where, "name"));
    if (!valid_principal_name(p.name))
      return r.field_error(t.get("name"), where, "name", "must be 1..64 characters of [A-Za-z0-9._-]");
    if (!principal_names.insert(p.name).second)
      return r.field_error(t.get("name"), where, "name", "principal \"" + p.name + "\" is configured twice");
    KVRT_TRY_ASSIGN(p.role,
                    r.choice<PrincipalRole>(t, where, "role", "worker",
                                            {{"worker", PrincipalRole::worker}, {"admin", PrincipalRole::admin}}));
    if (p.role == PrincipalRole::admin) {
      if (t.get("namespaces") != nullptr)
        return r.field_error(t.get("namespaces"), where, "namespaces",
                             "an admin principal uses no namespace (give K/V access to a worker principal)");
    } else {
      KVRT_TRY_ASSIGN(p.namespaces, r.string_array(t, where, "namespaces"));
    }
    std::set<std::string, std::less<>> seen;
    for (size_t j = 0; j < p.namespaces.size(); ++j) {
      const toml::node* item = t.get("namespaces")->as_array()->get(j);
      const std::string field = "namespaces[" + std::to_string(j) + "]";
      if (!names.contains(p.namespaces[j]))
        return r.field_error(item, where, field, "namespace \"" + p.namespaces[j] + "\" is not configured");
      if (!seen.insert(p.namespaces[j]).second)
        return r.field_error(item, where, field, "namespace \"" + p.namespaces[j] + "\" is listed twice");
    }
    if (t.get("token_sha256") != nullptr) {
      std::string hex;
      KVRT_TRY_ASSIGN(hex, r.string(t, where, "token_sha256"));
      Sha256Digest d;
      if (!Sha256Digest::from_hex(hex, d))
        return r.field_error(t.get("token_sha256"), where, "token_sha256",
                             "must be 64 hex digits (SHA-256 of the token)");
      if (!digests.insert(d).second)
        return r.field_error(t.get("token_sha256"), where, "token_sha256", "two principals share one token digest");
      p.token_sha256 = d;
    }
    c.principals.push_back(std::move(p));
  }
  return c;
}

Result<AuthorizationConfig> load_authorization_config(const std::string& path) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return read_authorization_config(*reader);
}

Result<AuthorizationConfig> parse_authorization_config(std::string_view text, const std::string& origin) {
  auto reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  return read_authorization_config(*reader);
}

}  // namespace kvrt
