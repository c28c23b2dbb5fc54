#include "services/allocator/namespace_quotas.hpp"

#include <set>

namespace kvrt {

bool BlockQuotaConfig::enforced() const {
  for (const DomainQuota& d : domains)
    if (d.quota_blocks) return true;
  for (const NamespaceQuota& n : namespaces)
    if (n.quota_blocks) return true;
  return false;
}

Status BlockQuotaConfig::validate() const {
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < domains.size(); ++i) {
    const std::string where = "domain[" + std::to_string(i) + "]";
    if (domains[i].name.empty() || !names.insert(domains[i].name).second)
      return make_error(ErrorCode::config_field, "a domain name is non-empty and unique", where + ".name");
    if (domains[i].quota_blocks && *domains[i].quota_blocks == 0)
      return make_error(ErrorCode::config_field, "a quota is at least one block", where + ".quota_blocks");
  }
  names.clear();
  for (size_t i = 0; i < namespaces.size(); ++i) {
    const std::string where = "namespace[" + std::to_string(i) + "]";
    if (namespaces[i].name.empty() || !names.insert(namespaces[i].name).second)
      return make_error(ErrorCode::config_field, "a namespace name is non-empty and unique", where);
    if (namespaces[i].quota_blocks && *namespaces[i].quota_blocks == 0)
      return make_error(ErrorCode::config_field, "a quota is at least one block", where + ".quota_blocks");
    if (namespaces[i].domain && *namespaces[i].domain >= domains.size())
      return make_error(ErrorCode::config_field, "the domain index is out of range", where + ".domain");
  }
  return Status::success();
}

NamespaceQuotas::NamespaceQuotas(BlockQuotaConfig config, CacheGroupId counted_group)
    : config_(std::move(config)),
      enforced_(config_.enforced()),
      counted_group_(counted_group),
      namespaces_(config_.namespaces.size()),
      domain_held_(config_.domains.size(), 0) {}

Result<uint32_t> NamespaceQuotas::namespace_index(std::string_view name, const char* field) const {
  for (uint32_t i = 0; i < config_.namespaces.size(); ++i)
    if (config_.namespaces[i].name == name) return i;
  return make_error(ErrorCode::authorization_unknown_namespace,
                    "no namespace \"" + std::string(name) + "\" is configured on this node", field);
}

std::optional<uint32_t> NamespaceQuotas::namespace_of(RequestId request) const {
  const auto it = request_namespace_.find(request.value);
  if (it == request_namespace_.end()) return std::nullopt;
  return it->second;
}

uint32_t NamespaceQuotas::refs_of(uint32_t ns, const PhysicalBlockHandle& h) const {
  const auto& refs = namespaces_[ns].refs;
  const auto it = refs.find(h.block.value);
  return it == refs.end() ? 0 : it->second;
}

int64_t NamespaceQuotas::added_blocks(uint32_t ns, const QuotaCharge& charge) const {
  int64_t added = charge.fresh_bundles;
  const size_t groups = charge.groups == 0 ? 1 : charge.groups;
  for (size_t i = 0; i < charge.referenced.size(); i += groups)
    if (refs_of(ns, charge.referenced[i]) == 0) ++added;
  // Only this request referenced the source: it leaves the namespace's holdings.
  if (charge.dropped && refs_of(ns, *charge.dropped) == 1) --added;
  return added;
}

std::optional<std::string> NamespaceQuotas::refusal(uint32_t ns, const QuotaCharge& charge) const {
  const int64_t added = added_blocks(ns, charge);
  if (added <= 0) return std::nullopt;
  const NamespaceQuota& n = config_.namespaces[ns];
  const auto over = [&](const std::string& who, uint32_t quota, uint32_t holds) -> std::optional<std::string> {
    if (holds + added <= quota) return std::nullopt;
    return who + " holds " + std::to_string(holds) + " of its " + std::to_string(quota) +
           "-block quota; this transaction needs " + std::to_string(added) + " more";
  };
  if (n.quota_blocks)
    if (auto why = over("namespace \"" + n.name + "\"", *n.quota_blocks, held(ns))) return why;
  if (n.domain)
    if (const DomainQuota& d = config_.domains[*n.domain]; d.quota_blocks)
      if (auto why = over("trust domain \"" + d.name + "\" (of namespace \"" + n.name + "\")", *d.quota_blocks,
                          domain_held_[*n.domain]))
        return why;
  return std::nullopt;
}

void NamespaceQuotas::open_request(RequestId request, uint32_t ns) { request_namespace_[request.value] = ns; }

void NamespaceQuotas::record(RequestId request, std::span<const RefcountDelta> deltas) {
  if (!enforced_) return;
  const std::optional<uint32_t> ns = namespace_of(request);
  if (!ns) return;
  auto& refs = namespaces_[*ns].refs;
  const size_t before = refs.size();
  for (const RefcountDelta& d : deltas) {
    if (d.handle.group != counted_group_) continue;
    // Every delta of a request's transaction is that request's own reference
    // (0x04B: request-map references and leases are counted apart, and a
    // lease is never part of a transaction receipt).
    if (d.refs_after > d.refs_before) {
      ++refs[d.handle.block.value];
    } else if (d.refs_after < d.refs_before) {
      const auto it = refs.find(d.handle.block.value);
      if (it != refs.end() && --it->second == 0) refs.erase(it);
    }
  }
  if (const std::optional<uint32_t> domain = config_.namespaces[*ns].domain)
    domain_held_[*domain] = static_cast<uint32_t>(domain_held_[*domain] + refs.size() - before);
}

void NamespaceQuotas::close_request(RequestId request) { request_namespace_.erase(request.value); }

void NamespaceQuotas::put(OwnerStats& out) const {
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    const std::string p = "quota_namespace" + std::to_string(i) + "_";
    put(p + "held_blocks", namespaces_[i].refs.size());
    put(p + "limit_blocks", config_.namespaces[i].quota_blocks.value_or(0));
    put(p + "refusals", namespaces_[i].refusals);
  }
  for (size_t d = 0; d < domain_held_.size(); ++d) {
    const std::string p = "quota_domain" + std::to_string(d) + "_";
    put(p + "held_blocks", domain_held_[d]);
    put(p + "limit_blocks", config_.domains[d].quota_blocks.value_or(0));
  }
}

Status NamespaceQuotas::validate(const BlockAllocator& core) const {
  const auto broken = [](const std::string& why) { return make_error(ErrorCode::invariant_violated, why, "quotas"); };
  std::vector<std::unordered_map<uint64_t, uint32_t>> derived(namespaces_.size());
  for (const auto& [request, ns] : request_namespace_) {
    if (ns >= namespaces_.size()) return broken("request " + std::to_string(request) + " names no namespace");
    if (!enforced_) continue;  // requests are known by namespace; holdings are kept with quotas only
    Result<std::vector<PhysicalBlockHandle>> table = core.table(RequestId{request}, 0);
    if (!table.ok())
      return broken("request " + std::to_string(request) +
                    " is charged to a namespace but the allocator has no table: " + table.error().describe());
    for (const PhysicalBlockHandle& h : *table) ++derived[ns][h.block.value];
  }
  std::vector<uint64_t> domain_sum(domain_held_.size(), 0);
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    const NamespaceQuota& n = config_.namespaces[i];
    if (derived[i] != namespaces_[i].refs)
      return broken("namespace \"" + n.name + "\" records " + std::to_string(namespaces_[i].refs.size()) +
                    " held blocks; its requests' tables reference " + std::to_string(derived[i].size()));
    if (n.quota_blocks && namespaces_[i].refs.size() > *n.quota_blocks)
      return broken("namespace \"" + n.name + "\" holds " + std::to_string(namespaces_[i].refs.size()) +
                    " blocks, over its quota of " + std::to_string(*n.quota_blocks));
    if (n.domain) domain_sum[*n.domain] += namespaces_[i].refs.size();
  }
  for (size_t d = 0; d < domain_held_.size(); ++d) {
    if (domain_sum[d] != domain_held_[d])
      return broken("trust domain \"" + config_.domains[d].name + "\" records " + std::to_string(domain_held_[d]) +
                    " held blocks; its namespaces hold " + std::to_string(domain_sum[d]));
    if (config_.domains[d].quota_blocks && domain_held_[d] > *config_.domains[d].quota_blocks)
      return broken("trust domain \"" + config_.domains[d].name + "\" holds " + std::to_string(domain_held_[d]) +
                    " blocks, over its quota of " + std::to_string(*config_.domains[d].quota_blocks));
  }
  return Status::success();
}

}  // namespace kvrt
