#pragma once
// NamespaceQuotas: block quotas per cache namespace and per trust domain, as
// the allocator owner enforces them (the threat model's "one tenant fills the
// pools"). A trust domain is a set of namespaces the node's authorization
// configuration declares together ([[domain]]); a namespace names at most one.
//
// What a namespace holds: the distinct bundles (one block per cache group)
// that its live requests reference, counted by their first group's block.
// A prefix block that several requests of the namespace share counts once; a
// cached block no request references (EVICTABLE, or leased only by the radix
// index or a reuse receipt) counts for nobody, so a namespace is never stuck
// at its quota behind blocks only the node's cache keeps. A domain holds the
// sum of its namespaces.
//
// The allocator core asks the gate of a request's namespace
// (NamespaceQuotaGate) before a transaction makes it hold more, and the
// service records every committed receipt's reference changes here. The
// rule, checked by validate() against the core's own tables: for every
// namespace, held == |union of its requests' first-group blocks| <= quota,
// and every domain's held is the sum of its namespaces' and within its
// quota.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/session_types.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/allocator/block_quota_gate.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct DomainQuota {
  std::string name;
  std::optional<uint32_t> quota_blocks;  // nullopt: the domain has no quota of its own
};

struct NamespaceQuota {
  std::string name;                      // "deployment/tenant"
  std::optional<uint32_t> quota_blocks;  // nullopt: only its domain's quota applies
  std::optional<uint32_t> domain;        // index into BlockQuotaConfig::domains
};

// The node's quotas, from its authorization configuration.
struct BlockQuotaConfig {
  std::vector<DomainQuota> domains;
  std::vector<NamespaceQuota> namespaces;
  // True when any namespace or domain has a quota: only then does the
  // allocator track holdings and require allocations to name a namespace.
  bool enforced() const;
  // Names unique and non-empty, domain indexes in range, quotas >= 1.
  Status validate() const;
};

class NamespaceQuotas {
 public:
  // `counted_group`: the cache group whose block stands for its bundle (the
  // allocator's first group: bundle-major lists name it first).
  explicit NamespaceQuotas(BlockQuotaConfig config = {}, CacheGroupId counted_group = {});

  bool enforced() const { return enforced_; }
  const BlockQuotaConfig& config() const { return config_; }
  // The configured namespace's index, or authorization_unknown_namespace
  // (field `field`).
  Result<uint32_t> namespace_index(std::string_view name, const char* field) const;
  std::optional<uint32_t> namespace_of(RequestId request) const;

  // How many blocks `charge` would add to namespace `ns`'s holdings (may be
  // negative: a copy-on-write whose source only this request referenced).
  int64_t added_blocks(uint32_t ns, const QuotaCharge& charge) const;
  // nullopt when namespace `ns` and its domain stay within their quotas
  // after `charge`; otherwise the refusal, naming the quota.
  std::optional<std::string> refusal(uint32_t ns, const QuotaCharge& charge) const;

  // A committed transaction of `request`: a new request (allocate, or a
  // fork's child inheriting its parent's namespace) is opened first; every
  // receipt's reference changes are recorded (holdings are kept only when
  // quotas are enforced; a request's namespace is known either way); a
  // released request is closed after its release was recorded.
  void open_request(RequestId request, uint32_t ns);
  void record(RequestId request, std::span<const RefcountDelta> deltas);
  void close_request(RequestId request);
  // A transaction of namespace `ns` answered quota_exceeded.
  void count_refusal(uint32_t ns) { ++namespaces_[ns].refusals; }

  uint32_t held(uint32_t ns) const { return static_cast<uint32_t>(namespaces_[ns].refs.size()); }
  uint32_t domain_held(uint32_t domain) const { return domain_held_[domain]; }
  uint64_t refusals(uint32_t ns) const { return namespaces_[ns].refusals; }
  // Adds, per configured namespace i (the order of [[namespace]]) and domain
  // d (of [[domain]]): quota_namespace<i>_held_blocks,
  // quota_namespace<i>_limit_blocks (0: none), quota_namespace<i>_refusals,
  // quota_domain<d>_held_blocks, quota_domain<d>_limit_blocks.
  void put(OwnerStats& out) const;

  // Re-derives every namespace's holdings from the core's tables.
  Status validate(const BlockAllocator& core) const;

 private:
  struct Holdings {
    // First-group block id -> how many of the namespace's requests reference it.
    std::unordered_map<uint64_t, uint32_t> refs;
    uint64_t refusals = 0;
  };
  uint32_t refs_of(uint32_t ns, const PhysicalBlockHandle& h) const;

  BlockQuotaConfig config_;
  bool enforced_ = false;
  CacheGroupId counted_group_;
  std::vector<Holdings> namespaces_;
  std::vector<uint32_t> domain_held_;
  std::unordered_map<uint64_t, uint32_t> request_namespace_;  // RequestId value -> namespace index
};

// The gate the core asks for one request of namespace `ns`.
class NamespaceQuotaGate final : public BlockQuotaGate {
 public:
  NamespaceQuotaGate(const NamespaceQuotas& quotas, uint32_t ns) : quotas_(quotas), ns_(ns) {}
  std::optional<std::string> refuse(const QuotaCharge& charge) const override { return quotas_.refusal(ns_, charge); }

 private:
  const NamespaceQuotas& quotas_;
  uint32_t ns_;
};

}  // namespace kvrt
