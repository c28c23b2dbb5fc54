#include "services/authorization/trust_domain_plan.hpp"

namespace kvrt {

Result<TrustDomainPlan> TrustDomainPlan::create(const AuthorizationConfig& config) {
  KVRT_TRY(config.validate());
  TrustDomainPlan plan;
  std::map<std::string, uint32_t, std::less<>> by_name;
  for (const DomainConfig& d : config.domains) {
    by_name.emplace(d.name, static_cast<uint32_t>(plan.names_.size()));
    plan.names_.push_back(d.name);
  }
  for (const NamespaceConfig& n : config.namespaces) {
    if (n.domain) {
      plan.namespace_domain_[n.name()] = by_name.at(*n.domain);  // validate(): every named domain is configured
      continue;
    }
    if (!by_name.contains("")) {
      by_name.emplace("", static_cast<uint32_t>(plan.names_.size()));
      plan.names_.emplace_back();
    }
    plan.namespace_domain_[n.name()] = by_name.at("");
  }
  if (plan.names_.empty()) plan.names_.emplace_back();  // no namespace at all: one (empty) pool set
  for (size_t i = 0; i < config.principals.size(); ++i) {
    const PrincipalConfig& p = config.principals[i];
    if (p.namespaces.empty()) continue;
    const uint32_t first = plan.domain_of_namespace(p.namespaces.front());
    for (const std::string& ns : p.namespaces) {
      const uint32_t d = plan.domain_of_namespace(ns);
      if (d == first) continue;
      const auto label = [&](uint32_t x) {
        return plan.names_[x].empty() ? std::string("(namespaces without a domain)") : "\"" + plan.names_[x] + "\"";
      };
      return make_error(ErrorCode::config_field,
                        "principal \"" + p.name + "\" may use namespaces of two trust domains, " + label(first) +
                            " and " + label(d) +
                            ": with domain_pools each session maps one domain's pools, so give it one domain's "
                            "namespaces (or a principal per domain)",
                        "principal[" + std::to_string(i) + "].namespaces");
    }
    plan.principal_domain_[p.name] = first;
  }
  return plan;
}

TrustDomainPlan TrustDomainPlan::shared() {
  TrustDomainPlan plan;
  plan.names_.emplace_back();
  return plan;
}

uint32_t TrustDomainPlan::domain_of_namespace(const std::string& namespace_name) const {
  const auto it = namespace_domain_.find(namespace_name);
  return it == namespace_domain_.end() ? 0 : it->second;
}

uint32_t TrustDomainPlan::domain_of_principal(const std::string& principal) const {
  const auto it = principal_domain_.find(principal);
  return it == principal_domain_.end() ? 0 : it->second;
}

uint32_t TrustDomainPlan::domain_of_namespaces(const std::vector<std::string>& namespaces) const {
  return namespaces.empty() ? 0 : domain_of_namespace(namespaces.front());
}

}  // namespace kvrt
