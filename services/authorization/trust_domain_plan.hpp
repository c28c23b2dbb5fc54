#pragma once
// TrustDomainPlan: which pool set serves which namespace when a node gives
// each trust domain pools of its own ([node] domain_pools). The domains are
// the authorization configuration's [[domain]] tables, in order, and, when
// some namespace names no domain, one more unnamed domain for those. A
// principal's namespaces must all lie in one domain: its session maps one
// pool set, so a worker that serves two domains would hold both sets'
// bytes, which is what separate pools exist to prevent.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/authorization/authorization_config.hpp"
#include "services/common/result.hpp"

namespace kvrt {

class TrustDomainPlan {
 public:
  // Every namespace's domain, every principal's domain. Errors:
  // config_field "principal[i].namespaces" naming the principal and the two
  // domains its namespaces span; those of AuthorizationConfig::validate().
  static Result<TrustDomainPlan> create(const AuthorizationConfig& config);
  // One domain for every namespace: the node's shared pools.
  static TrustDomainPlan shared();

  uint32_t domain_count() const { return static_cast<uint32_t>(names_.size()); }
  // The domain's name; "" for the namespaces that name none (and for the
  // shared plan's only domain).
  const std::string& name(uint32_t domain) const { return names_.at(domain); }
  // The domain of a configured namespace; 0 for a name the plan does not
  // know (which no grant ever names: the authorization owner refuses it).
  uint32_t domain_of_namespace(const std::string& namespace_name) const;
  // The domain of a principal's sessions: that of its namespaces; 0 for a
  // principal allowed none (an admin: it is handed no pools at all).
  uint32_t domain_of_principal(const std::string& principal) const;
  // The domain of a session allowed these namespaces (what a hello answers).
  uint32_t domain_of_namespaces(const std::vector<std::string>& namespaces) const;

 private:
  std::vector<std::string> names_;
  std::map<std::string, uint32_t, std::less<>> namespace_domain_;
  std::map<std::string, uint32_t, std::less<>> principal_domain_;
};

}  // namespace kvrt
