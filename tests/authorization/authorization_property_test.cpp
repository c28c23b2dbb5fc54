// Seeded randomised test of the namespace / authorization owner (spec 0x0CE):
// random authentication, authorization, capability checks, holds, principal
// ends and revocations, purges and live invalidations, against a reference model of who holds
// which grant at which generation and what each purge waits for. After every
// operation the owner validates; a failed operation leaves its digest
// unchanged; success or failure agrees with the model.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "tests/support/authorization_fixture.hpp"

using namespace kvrt;
using namespace kvrt::test;

namespace {

struct ModelPurge {
  std::string ns;
  uint64_t g = 0;
  int last_step = 1;
  std::set<uint64_t> pending;  // acknowledgeable work ids
};

struct Model {
  std::map<std::string, uint64_t> generation{{kTenantA, 4}, {kTenantB, 1}};
  std::map<std::string, bool> admitting{{kTenantA, true}, {kTenantB, true}};
  std::map<std::string, std::set<std::string>> allowed{
      {"worker-a", {kTenantA}}, {"worker-b", {kTenantB}}, {"worker-ab", {kTenantA, kTenantB}}};
  std::set<std::string> barred;
  std::map<std::pair<std::string, std::string>, uint64_t> grants;  // (principal, ns) -> grant id
  struct Hold {
    std::string ns;
    uint64_t g;
    HoldKind kind;
  };
  std::map<uint64_t, Hold> holds;
  std::map<uint64_t, ModelPurge> purges;  // open ones
  std::map<std::string, uint64_t> open_purge;

  uint64_t live(const std::string& ns, uint64_t g, HoldKind k) const {
    uint64_t n = 0;
    for (const auto& [id, h] : holds) n += h.ns == ns && h.g == g && h.kind == k;
    return n;
  }
  bool cap_valid(const std::string& principal, const AuthorizedLookup& c) const {
    if (barred.contains(principal)) return false;
    if (generation.at(c.namespace_name()) != c.generation().value || !admitting.at(c.namespace_name())) return false;
    auto it = grants.find({principal, c.namespace_name()});
    return it != grants.end() && it->second == c.grant_id().value;
  }
};

}  // namespace

TEST_CASE("random authorization operations agree with a reference model", "[authorization][property]") {
  const uint64_t seed = 0xa117c0deull;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto f = AuthorityFixture::make();
  NamespaceAuthority& a = f.authority;
  Model m;
  const std::vector<std::string> principals{"worker-a", "worker-b", "worker-ab"};
  const std::vector<std::string> namespaces{kTenantA, kTenantB, "prod-eu1/tenant-z"};
  std::vector<std::pair<std::string, AuthorizedLookup>> caps;
  std::vector<uint64_t> hold_ids{999};
  uint64_t adapter_serial = 0, ok_ops = 0;

  for (int n = 0; n < 6000; ++n) {
    const Sha256Digest before = a.state_digest();
    const size_t op = pick(100);
    bool expect_ok = false, got_ok = false;
    std::string what;
    if (op < 10) {
      const std::string& p = principals[pick(3)];
      what = "authenticate " + p;
      expect_ok = !m.barred.contains(p);
      got_ok = a.authenticate(f.token(p)).ok();
    } else if (op < 35) {
      const std::string& p = principals[pick(3)];
      const std::string& ns = namespaces[pick(3)];
      what = "authorize " + p + " " + ns;
      expect_ok = !m.barred.contains(p) && m.allowed.at(p).contains(ns) && m.admitting.at(ns);
      auto r = a.authorize(f.principal(p), ns);
      got_ok = r.ok();
      if (r.ok()) {
        CHECK(r->generation().value == m.generation.at(ns));
        auto [it, fresh] = m.grants.try_emplace({p, ns}, r->grant_id().value);
        CHECK(it->second == r->grant_id().value);  // a live grant is reused
        if (fresh) caps.emplace_back(p, *r);
      }
    } else if (op < 50 && !caps.empty()) {
      const auto& [p, c] = caps[pick(caps.size())];
      what = "check " + p;
      expect_ok = m.cap_valid(p, c);
      got_ok = a.check(c).ok();
    } else if (op < 62 && !caps.empty()) {
      const auto& [p, c] = caps[pick(caps.size())];
      const HoldKind kind = pick(3) == 0 ? HoldKind::executable_receipt : HoldKind::lease;
      what = "hold " + p;
      expect_ok = m.cap_valid(p, c);
      auto r = a.record_hold(c, kind, n);
      got_ok = r.ok();
      if (r.ok()) {
        m.holds[r->value] = Model::Hold{c.namespace_name(), c.generation().value, kind};
        hold_ids.push_back(r->value);
      }
    } else if (op < 74) {
      const uint64_t id = hold_ids[pick(hold_ids.size())];
      what = "release hold " + std::to_string(id);
      expect_ok = m.holds.contains(id);
      got_ok = a.release_hold(HoldId{id}).ok();
      if (got_ok) m.holds.erase(id);
    } else if (op < 78) {
      const std::string& p = principals[pick(3)];
      const bool bar = pick(50) == 0;  // rare: a barred principal stays barred
      what = (bar ? "revoke " : "end ") + p;
      expect_ok = !(bar && m.barred.contains(p));
      got_ok = (bar ? a.revoke_principal(f.principal(p)) : a.end_principal_grants(f.principal(p))).ok();
      if (got_ok) {
        std::erase_if(m.grants, [&](const auto& g) { return g.first.first == p; });
        if (bar) m.barred.insert(p);
      }
    } else if (op < 82) {
      const std::string& ns = namespaces[pick(2)];
      what = "begin purge " + ns;
      PurgeRequest req = adapter_purge(pick(2) == 0);
      req.successor = adapter_successor("lora-" + std::to_string(++adapter_serial));
      expect_ok = !m.open_purge.contains(ns);
      auto r = a.begin_purge(ns, req);
      got_ok = r.ok();
      if (r.ok()) {
        m.admitting[ns] = false;
        m.open_purge[ns] = r->purge.value;
        m.purges[r->purge.value] = ModelPurge{ns, m.generation.at(ns), 1, {}};
      }
    } else if (op < 94 && !m.purges.empty()) {
      auto it = m.purges.begin();
      std::advance(it, pick(m.purges.size()));
      ModelPurge& p = it->second;
      const int step = p.last_step + 1;
      what = "advance purge to step " + std::to_string(step);
      const uint64_t leases = m.live(p.ns, p.g, HoldKind::lease);
      const uint64_t receipts = m.live(p.ns, p.g, HoldKind::executable_receipt);
      expect_ok = step == 2 || step == 3 || ((step == 4 || step == 6) && p.pending.empty()) ||
                  (step == 5 && leases == 0) || (step == 7 && p.pending.empty() && receipts == 0 && leases == 0);
      auto r = a.advance_purge(PurgeId{it->first});
      got_ok = r.ok();
      if (r.ok()) {
        p.last_step = step;
        for (const PurgeWorkItem& w : r->work_items)
          if (w.kind != PurgeWorkKind::cancel_lease) p.pending.insert(w.id.value);
        if (step == 2) {
          ++m.generation[p.ns];
          m.admitting[p.ns] = true;
          std::erase_if(m.grants, [&](const auto& g) { return g.first.second == p.ns; });
        }
        if (step == 7) {
          m.open_purge.erase(p.ns);
          m.purges.erase(it);
        }
      } else {
        CHECK(r.error().code == ErrorCode::authorization_purge_pending);
      }
    } else if (op < 97) {
      // A live invalidation (an adapter swap): the generation moves on, the
      // namespace keeps admitting, its grants end and its holds stay on the
      // old generation. An open purge advances the generation itself.
      const std::string& ns = namespaces[pick(3)];
      what = "invalidate " + ns;
      expect_ok = m.generation.contains(ns) && !m.open_purge.contains(ns);
      auto r =
          a.invalidate(ns, InvalidationCause::adapter, adapter_successor("lora-" + std::to_string(++adapter_serial)));
      got_ok = r.ok();
      if (r.ok()) {
        CHECK(r->receipt.old_generation.value == m.generation.at(ns));
        CHECK(r->receipt.new_generation.value == m.generation.at(ns) + 1);
        uint64_t ended = 0;
        for (const auto& g : m.grants) ended += g.first.second == ns;
        CHECK(r->ended_grants.size() == ended);
        ++m.generation[ns];
        std::erase_if(m.grants, [&](const auto& g) { return g.first.second == ns; });
        auto st = a.standing(ns);
        REQUIRE(st.ok());
        CHECK(st->generation.value == m.generation.at(ns));
        CHECK(st->live_grants == 0);
        CHECK(st->admitting == m.admitting.at(ns));
      } else if (m.generation.contains(ns)) {
        CHECK(r.error().code == ErrorCode::authorization_purge_pending);
      } else {
        CHECK(r.error().code == ErrorCode::authorization_unknown_namespace);
      }
    } else if (!m.purges.empty()) {
      auto it = m.purges.begin();
      std::advance(it, pick(m.purges.size()));
      const bool real = !it->second.pending.empty() && pick(4) != 0;
      const uint64_t item = real ? *it->second.pending.begin() : 100000 + n;
      what = "acknowledge " + std::to_string(item);
      expect_ok = real;
      got_ok = a.acknowledge_purge_work(PurgeId{it->first}, PurgeWorkId{item}).ok();
      if (got_ok) it->second.pending.erase(item);
    } else {
      continue;
    }
    INFO("op " << n << ": " << what);
    CHECK(got_ok == expect_ok);
    if (!got_ok) CHECK(a.state_digest() == before);
    ok_ops += got_ok;
    auto v = a.validate();
    INFO((v.ok() ? std::string("ok") : v.error().describe()));
    REQUIRE(v.ok());
    CHECK(a.live_grants() == m.grants.size());
  }
  CHECK(ok_ops > 1000);
}
