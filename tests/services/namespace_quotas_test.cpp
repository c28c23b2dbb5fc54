// Block quotas per namespace and trust domain, as the allocator owner
// enforces them (services/allocator/namespace_quotas.hpp), driven through
// AllocatorService without actors. The reference is brute force: what a
// namespace holds is recomputed after every step as the union of its live
// requests' first-group tables, and what an operation would add is derived
// from the operation's meaning (0x04E's append paths read from the core's
// block states), independently of the service's incremental bookkeeping.
// Randomised with a printed seed.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "services/allocator/allocator_service.hpp"

namespace kvrt::test {
namespace {

constexpr uint32_t kP = 16;  // block size [tokens]
constexpr uint32_t kGroups = 2;

BlockAllocatorConfig quota_pools(uint32_t blocks) {
  BlockAllocatorConfig c;
  c.block_size = kP;
  for (uint32_t g = 0; g < kGroups; ++g)
    c.groups.push_back(GroupPoolConfig{CacheGroupId{g}, PoolId{1 + g}, PoolGeneration{1}, blocks, 0, 64, {}});
  return c;
}

// Domain "alpha" (20 blocks) holds t/a (12 of its own) and t/b (none of its
// own); domain "beta" (no quota) holds t/c (10); t/d is in no domain and has
// no quota.
BlockQuotaConfig test_quotas() {
  BlockQuotaConfig q;
  q.domains = {DomainQuota{"alpha", 20}, DomainQuota{"beta", std::nullopt}};
  q.namespaces = {NamespaceQuota{"t/a", 12, 0}, NamespaceQuota{"t/b", std::nullopt, 0}, NamespaceQuota{"t/c", 10, 1},
                  NamespaceQuota{"t/d", std::nullopt, std::nullopt}};
  return q;
}

int64_t stat(const OwnerStats& s, const std::string& name) {
  for (const StatValue& v : s.values)
    if (v.name == name) return v.value;
  FAIL("no stat " << name);
  return -1;
}

struct LiveRequest {
  SessionId session;
  uint32_t ns = 0;
  RequestFence fence;
};

// The brute-force view: every namespace's held first-group blocks, from the
// core's tables of the requests the test knows to be the namespace's.
struct Holdings {
  std::vector<std::map<uint64_t, uint32_t>> refs;  // per namespace: block id -> requests referencing it
  size_t held(uint32_t ns) const { return refs[ns].size(); }
  uint32_t refs_of(uint32_t ns, const PhysicalBlockHandle& h) const {
    const auto it = refs[ns].find(h.block.value);
    return it == refs[ns].end() ? 0 : it->second;
  }
};

Holdings brute_force(const AllocatorService& svc, const std::vector<LiveRequest>& live, size_t namespaces) {
  Holdings h;
  h.refs.resize(namespaces);
  for (const LiveRequest& r : live) {
    const Result<std::vector<PhysicalBlockHandle>> table = svc.core().table(r.fence.request, 0);
    REQUIRE(table.ok());
    for (const PhysicalBlockHandle& b : *table) ++h.refs[r.ns][b.block.value];
  }
  return h;
}

// Whether adding `added` blocks to namespace `ns` breaks a quota of `q`.
bool over_quota(const BlockQuotaConfig& q, const Holdings& h, uint32_t ns, int64_t added) {
  if (added <= 0) return false;
  const NamespaceQuota& n = q.namespaces[ns];
  if (n.quota_blocks && static_cast<int64_t>(h.held(ns)) + added > *n.quota_blocks) return true;
  if (!n.domain || !q.domains[*n.domain].quota_blocks) return false;
  int64_t domain = 0;
  for (uint32_t i = 0; i < q.namespaces.size(); ++i)
    if (q.namespaces[i].domain == n.domain) domain += static_cast<int64_t>(h.held(i));
  return domain + added > *q.domains[*n.domain].quota_blocks;
}

}  // namespace

TEST_CASE("block quotas: random traffic is refused exactly when a namespace or its domain would exceed its quota",
          "[node][services][quota][property]") {
  const uint64_t seed = GENERATE(1ull, 7ull, 20261204ull);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const BlockQuotaConfig quotas = test_quotas();
  AllocatorService svc(BlockAllocator::create(quota_pools(48)).value(), AllocatorServiceOptions{false, quotas});
  const std::vector<std::string> names{"t/a", "t/b", "t/c", "t/d"};
  // Session 1 serves t/a and t/b, session 2 t/c and t/d, session 3 only t/a.
  const std::map<uint64_t, std::vector<uint32_t>> grants{{1, {0, 1}}, {2, {2, 3}}, {3, {0}}};
  auto grant_all = [&](uint64_t s) {
    for (uint32_t ns : grants.at(s)) svc.grant(SessionId{s}, names[ns]);
  };
  for (const auto& [s, _] : grants) grant_all(s);

  std::vector<LiveRequest> live;
  uint64_t refused = 0, committed_growth = 0, refused_with_hits = 0;
  std::vector<uint64_t> refused_by_ns(names.size(), 0);
  auto refresh = [&](LiveRequest& r, const AllocationReceipt& receipt) {
    r.fence.generation = receipt.request_generation;
    r.fence.table_version = receipt.table_version_after;
  };
  auto commit_all_rows = [&](LiveRequest& r) {
    const Result<uint32_t> ctx = svc.core().context_tokens(r.fence.request);
    REQUIRE(ctx.ok());
    const AllocatorOutcome o = svc.apply_one(r.session, CommitRowsOp{r.fence, *ctx});
    if (const auto* c = std::get_if<AllocationReceipt>(&o)) refresh(r, *c);
  };
  // Full, committed bundles of a live request of namespace `ns`, bundle-major
  // (the prefix hit an index would hand out), or none.
  auto prefix_of = [&](uint32_t ns, uint32_t max_bundles) {
    std::vector<PhysicalBlockHandle> hit;
    std::vector<const LiveRequest*> same;
    for (const LiveRequest& r : live)
      if (r.ns == ns) same.push_back(&r);
    if (same.empty()) return hit;
    const LiveRequest& src = *same[rng() % same.size()];
    std::vector<std::vector<PhysicalBlockHandle>> tables(kGroups);
    for (uint32_t g = 0; g < kGroups; ++g) tables[g] = svc.core().table(src.fence.request, g).value();
    const uint32_t bundles = std::min<uint32_t>(max_bundles, static_cast<uint32_t>(tables[0].size()));
    for (uint32_t b = 0; b < bundles; ++b) {
      bool full = true;
      for (uint32_t g = 0; g < kGroups; ++g) full = full && svc.core().block(tables[g][b]).value().valid_rows == kP;
      if (!full) break;
      for (uint32_t g = 0; g < kGroups; ++g) hit.push_back(tables[g][b]);
    }
    return hit;
  };

  for (int step = 0; step < 2500; ++step) {
    INFO("step " << step);
    const Holdings before = brute_force(svc, live, names.size());
    const StateDigest digest_before = svc.core().state_digest();
    const uint32_t kind = static_cast<uint32_t>(rng() % 10);
    std::optional<int64_t> added;  // predicted growth of the op's namespace; nullopt: no quota question
    uint32_t op_ns = 0;
    AllocatorOutcome outcome;
    size_t grows = live.size();  // index of the request the op grows (live.size(): a new one)

    if (kind <= 2 || live.empty()) {
      const uint64_t s = 1 + rng() % 3;
      op_ns = grants.at(s)[rng() % grants.at(s).size()];
      std::vector<PhysicalBlockHandle> hit =
          rng() % 2 ? prefix_of(op_ns, 1 + rng() % 3) : std::vector<PhysicalBlockHandle>{};
      const uint32_t hit_bundles = static_cast<uint32_t>(hit.size() / kGroups);
      const uint32_t rows = hit_bundles * kP + 1 + static_cast<uint32_t>(rng() % 50);
      const uint32_t fresh = (rows + kP - 1) / kP - hit_bundles;
      int64_t a = fresh;
      for (size_t i = 0; i < hit.size(); i += kGroups) a += before.refs_of(op_ns, hit[i]) == 0 ? 1 : 0;
      added = a;
      outcome = svc.apply_one(SessionId{s}, AllocateOp{rows, hit, std::nullopt, names[op_ns]});
      if (const auto* r = std::get_if<AllocationReceipt>(&outcome)) {
        if (r->outcome == AllocationOutcome::quota_exceeded && !hit.empty()) ++refused_with_hits;
        if (r->outcome == AllocationOutcome::committed) {
          live.push_back(
              LiveRequest{SessionId{s}, op_ns, {r->request_id, r->request_generation, r->table_version_after}});
          commit_all_rows(live.back());
        }
      }
    } else if (kind <= 5) {  // append one row (any of the three paths of 0x04E)
      grows = rng() % live.size();
      LiveRequest& r = live[grows];
      op_ns = r.ns;
      const uint32_t ctx = svc.core().context_tokens(r.fence.request).value();
      if (ctx % kP == 0) {
        added = 1;
      } else {
        bool shared = false;
        PhysicalBlockHandle tail0;
        for (uint32_t g = 0; g < kGroups; ++g) {
          const PhysicalBlockHandle h = svc.core().table(r.fence.request, g).value().at(ctx / kP);
          if (g == 0) tail0 = h;
          const BlockMeta m = svc.core().block(h).value();
          shared = shared || m.refcount > 1 || m.cache_key != kNoCacheKey;
        }
        added = shared ? 1 - (before.refs_of(op_ns, tail0) == 1 ? 1 : 0) : 0;
      }
      outcome = svc.apply_one(r.session, AppendOp{r.fence, {}, std::nullopt});
      if (const auto* a = std::get_if<AllocationReceipt>(&outcome); a && a->outcome == AllocationOutcome::committed) {
        refresh(r, *a);
        commit_all_rows(r);
      }
    } else if (kind == 6) {  // fork: the child shares every block, its namespace adds none
      LiveRequest parent = live[rng() % live.size()];
      op_ns = parent.ns;
      added = 0;
      outcome = svc.apply_one(parent.session, ForkOp{parent.fence});
      if (const auto* f = std::get_if<AllocationReceipt>(&outcome); f && f->outcome == AllocationOutcome::committed)
        live.push_back(
            LiveRequest{parent.session, parent.ns, {f->request_id, f->request_generation, f->table_version_after}});
    } else if (kind == 7) {  // touch: another request's full bundles join this one at a block boundary
      grows = rng() % live.size();
      LiveRequest& r = live[grows];
      op_ns = r.ns;
      const uint32_t ctx = svc.core().context_tokens(r.fence.request).value();
      std::vector<PhysicalBlockHandle> bundles = prefix_of(op_ns, 2);
      // A block the request already holds would be named twice: the core refuses that as bad input.
      std::set<uint64_t> own;
      const std::vector<PhysicalBlockHandle> table = svc.core().table(r.fence.request, 0).value();
      for (const PhysicalBlockHandle& h : table) own.insert(h.block.value);
      bool overlap = false;
      for (size_t i = 0; i < bundles.size(); i += kGroups) overlap = overlap || own.contains(bundles[i].block.value);
      if (ctx % kP != 0 || bundles.empty() || overlap) continue;
      int64_t a = 0;
      for (size_t i = 0; i < bundles.size(); i += kGroups) a += before.refs_of(op_ns, bundles[i]) == 0 ? 1 : 0;
      added = a;
      outcome = svc.apply_one(r.session, TouchOp{r.fence, bundles});
      if (const auto* t = std::get_if<AllocationReceipt>(&outcome); t && t->outcome == AllocationOutcome::committed)
        refresh(r, *t);
    } else if (kind == 8) {  // release
      const size_t i = rng() % live.size();
      outcome = svc.apply_one(live[i].session, ReleaseOp{live[i].fence, ReleaseReason::finished});
      REQUIRE(std::holds_alternative<ReleaseResult>(outcome));
      live.erase(live.begin() + static_cast<long>(i));
    } else {  // a session ends: its requests go back, its grants end; it authorizes again
      const uint64_t s = 1 + rng() % 3;
      (void)svc.end_session(SessionId{s});
      std::erase_if(live, [&](const LiveRequest& r) { return r.session.value == s; });
      grant_all(s);
    }

    const Status v = svc.validate();
    INFO((v.ok() ? std::string("valid") : v.error().describe()));
    REQUIRE(v.ok());
    const Holdings after = brute_force(svc, live, names.size());
    if (!added) continue;
    const auto* receipt = std::get_if<AllocationReceipt>(&outcome);
    INFO("namespace " << names[op_ns] << " held " << before.held(op_ns) << ", op adds " << *added);
    REQUIRE(receipt != nullptr);
    const bool expect_refusal = over_quota(quotas, before, op_ns, *added);
    CHECK((receipt->outcome == AllocationOutcome::quota_exceeded) == expect_refusal);
    if (receipt->outcome == AllocationOutcome::quota_exceeded) {
      ++refused;
      ++refused_by_ns[op_ns];
      CHECK(svc.core().state_digest() == digest_before);  // nothing changed
      CHECK_FALSE(receipt->rollback_reason.empty());
      if (grows < live.size()) CHECK(after.held(op_ns) == before.held(op_ns));
    } else if (receipt->outcome == AllocationOutcome::committed) {
      CHECK(static_cast<int64_t>(after.held(op_ns)) == static_cast<int64_t>(before.held(op_ns)) + *added);
      committed_growth += *added > 0 ? 1 : 0;
    }
  }
  // The run reached every quota and grew under it many times.
  CHECK(refused > 50);
  CHECK(committed_growth > 200);
  CHECK(refused_by_ns[0] > 0);  // t/a's own quota
  CHECK(refused_by_ns[1] > 0);  // t/b has none: only its domain's
  CHECK(refused_by_ns[2] > 0);
  CHECK(refused_by_ns[3] == 0);  // t/d has no quota and no domain
  const OwnerStats s = svc.stats();
  CHECK(stat(s, "quota_exceeded") == static_cast<int64_t>(refused));
  for (uint32_t ns = 0; ns < names.size(); ++ns)
    CHECK(stat(s, "quota_namespace" + std::to_string(ns) + "_refusals") == static_cast<int64_t>(refused_by_ns[ns]));
  CHECK(stat(s, "reuse_quota_exceeded") == static_cast<int64_t>(refused_with_hits));

  // Every session ends: nothing is held, by anyone.
  for (uint64_t s = 1; s <= 3; ++s) (void)svc.end_session(SessionId{s});
  REQUIRE(svc.validate().ok());
  const OwnerStats end = svc.stats();
  for (uint32_t ns = 0; ns < names.size(); ++ns)
    CHECK(stat(end, "quota_namespace" + std::to_string(ns) + "_held_blocks") == 0);
  CHECK(stat(end, "quota_domain0_held_blocks") == 0);
}

TEST_CASE("block quotas: an allocation names a namespace its session was granted", "[node][services][quota]") {
  AllocatorService svc(BlockAllocator::create(quota_pools(48)).value(), AllocatorServiceOptions{false, test_quotas()});
  svc.grant(SessionId{1}, "t/a");
  const StateDigest before = svc.core().state_digest();
  // No namespace on a node with quotas: bad input.
  AllocatorOutcome o = svc.apply_one(SessionId{1}, AllocateOp{20, {}, std::nullopt, ""});
  REQUIRE(std::holds_alternative<Error>(o));
  CHECK(std::get<Error>(o).code == ErrorCode::invalid_argument);
  CHECK(std::get<Error>(o).field == "namespace_name");
  // Another tenant's namespace, and one that does not exist: the same
  // refusal, so that it tells nothing of the configuration.
  for (const char* name : {"t/c", "t/zz"}) {
    o = svc.apply_one(SessionId{1}, AllocateOp{20, {}, std::nullopt, name});
    REQUIRE(std::holds_alternative<Error>(o));
    CHECK(std::get<Error>(o).code == ErrorCode::authorization_namespace_denied);
    CHECK(std::get<Error>(o).field == "namespace_name");
  }
  CHECK(svc.core().state_digest() == before);
  // The grant ends with the session.
  o = svc.apply_one(SessionId{1}, AllocateOp{20, {}, std::nullopt, "t/a"});
  CHECK(std::get<AllocationReceipt>(o).outcome == AllocationOutcome::committed);
  (void)svc.end_session(SessionId{1});
  o = svc.apply_one(SessionId{1}, AllocateOp{20, {}, std::nullopt, "t/a"});
  CHECK(std::get<Error>(o).code == ErrorCode::authorization_namespace_denied);
  CHECK(svc.validate().ok());
}

TEST_CASE("block quotas: a node without quotas needs no namespace and tracks nothing", "[node][services][quota]") {
  BlockQuotaConfig none = test_quotas();
  for (DomainQuota& d : none.domains) d.quota_blocks.reset();
  for (NamespaceQuota& n : none.namespaces) n.quota_blocks.reset();
  AllocatorService svc(BlockAllocator::create(quota_pools(48)).value(), AllocatorServiceOptions{false, none});
  const AllocatorOutcome o = svc.apply_one(SessionId{1}, AllocateOp{40 * kP, {}, std::nullopt, ""});
  CHECK(std::get<AllocationReceipt>(o).outcome == AllocationOutcome::committed);
  const OwnerStats s = svc.stats();
  CHECK(stat(s, "quotas_enforced") == 0);
  CHECK(stat(s, "quota_exceeded") == 0);
  CHECK(svc.validate().ok());
}

TEST_CASE("block quotas: the refusal names the quota and what its owner holds", "[node][services][quota]") {
  AllocatorService svc(BlockAllocator::create(quota_pools(48)).value(), AllocatorServiceOptions{false, test_quotas()});
  svc.grant(SessionId{1}, "t/a");
  svc.grant(SessionId{1}, "t/b");
  // t/a takes 10 of its 12 blocks; 3 more would be 13.
  CHECK(
      std::get<AllocationReceipt>(svc.apply_one(SessionId{1}, AllocateOp{10 * kP, {}, std::nullopt, "t/a"})).outcome ==
      AllocationOutcome::committed);
  AllocationReceipt r =
      std::get<AllocationReceipt>(svc.apply_one(SessionId{1}, AllocateOp{3 * kP, {}, std::nullopt, "t/a"}));
  CHECK(r.outcome == AllocationOutcome::quota_exceeded);
  CHECK(r.rollback_reason == "namespace \"t/a\" holds 10 of its 12-block quota; this transaction needs 3 more");
  // t/b has no quota of its own, but shares alpha's 20 with t/a's 10.
  CHECK(
      std::get<AllocationReceipt>(svc.apply_one(SessionId{1}, AllocateOp{10 * kP, {}, std::nullopt, "t/b"})).outcome ==
      AllocationOutcome::committed);
  r = std::get<AllocationReceipt>(svc.apply_one(SessionId{1}, AllocateOp{1, {}, std::nullopt, "t/b"}));
  CHECK(r.outcome == AllocationOutcome::quota_exceeded);
  CHECK(r.rollback_reason ==
        "trust domain \"alpha\" (of namespace \"t/b\") holds 20 of its 20-block quota; this transaction needs 1 more");
  CHECK(svc.validate().ok());
}

}  // namespace kvrt::test
