// NamespaceAuthority::validate() and state_digest(): the invariants listed in
// namespace_authority.hpp, re-derived from scratch.
#include <map>

#include "services/authorization/namespace_authority.hpp"

namespace kvrt {
namespace {

Error broken(std::string reason, std::string field) {
  return make_error(ErrorCode::invariant_violated, std::move(reason), std::move(field));
}

}  // namespace

Status NamespaceAuthority::validate() const {
  KVRT_TRY(registry_.validate());
  if (registry_.namespace_count() != namespaces_.size())
    return broken("registry holds " + std::to_string(registry_.namespace_count()) + " namespaces, the authority " +
                      std::to_string(namespaces_.size()),
                  "namespaces");

  std::set<Sha256Digest> digests;
  for (const auto& [pid, p] : principals_) {
    const std::string where = "principal@" + std::to_string(pid.value);
    if (!digests.insert(p.token_sha256).second) return broken("two principals share a token digest", where);
    if (p.barred && !p.grants.empty()) return broken("a revoked principal holds grants", where);
    for (GrantId g : p.grants) {
      auto it = grants_.find(g);
      if (it == grants_.end() || it->second.principal != pid)
        return broken("principal lists grant " + std::to_string(g.value) + " it does not hold", where);
    }
  }

  if (grant_by_principal_namespace_.size() != grants_.size())
    return broken("grant index and grant table differ in size", "grants");
  for (const auto& [gid, g] : grants_) {
    const std::string where = "grant@" + std::to_string(gid.value);
    auto pit = principals_.find(g.principal);
    if (pit == principals_.end() || !pit->second.grants.contains(gid))
      return broken("grant's principal does not list it", where);
    if (!pit->second.namespaces.contains(g.namespace_id))
      return broken("grant for a namespace its principal may not use", where);
    if (g.namespace_id.value >= namespaces_.size()) return broken("grant names an unknown namespace", where);
    if (g.generation != current_generation(namespaces_[g.namespace_id.value]))
      return broken("grant outlived its namespace generation", where);
    auto idx = grant_by_principal_namespace_.find({g.principal, g.namespace_id});
    if (idx == grant_by_principal_namespace_.end() || idx->second != gid)
      return broken("grant index does not point at the grant", where);
  }

  // Holds are exactly the registry's live admissions, generation by generation.
  std::map<std::pair<std::string, uint64_t>, std::set<uint64_t>> tickets;
  for (const auto& [hid, h] : holds_) {
    const std::string where = "hold@" + std::to_string(hid.value);
    if (h.ticket.namespace_name != h.namespace_name || h.ticket.generation != h.generation)
      return broken("hold's admission ticket names another generation", where);
    if (!principals_.contains(h.principal)) return broken("hold of an unknown principal", where);
    if (!tickets[{h.namespace_name, h.generation.value}].insert(h.ticket.ticket_id).second)
      return broken("two holds share one admission", where);
  }
  for (const NamespaceState& ns : namespaces_) {
    const GenerationRecord* cur = registry_.current(ns.name);
    if (cur == nullptr) return broken("namespace missing from the registry", ns.name);
    if (!digests_equal_constant_time(ns.salt_digest, cache_salt_digest(cur->isolation.cache_salt)))
      return broken("salt digest differs from the registry's salt", ns.name);
    for (uint64_t g = cur->generation().value; g > 0; --g) {
      const GenerationRecord* r = registry_.find(ns.name, NamespaceGeneration{g});
      if (r == nullptr) break;
      const auto it = tickets.find({ns.name, g});
      const std::set<uint64_t> held = it == tickets.end() ? std::set<uint64_t>{} : it->second;
      if (held != r->live_admissions)
        return broken("registry admissions differ from the authority's holds", ns.name + "@" + std::to_string(g));
    }
    // Closed exactly while the open purge sits at step 1.
    const bool at_step_one = ns.open_purge && purges_.contains(*ns.open_purge) &&
                             purges_.at(*ns.open_purge).last_step == PurgeStep::stop_admitting;
    if (ns.admitting == at_step_one) return broken("admitting state disagrees with the open purge", ns.name);
  }
  for (const auto& [id, h] : tickets)
    if (registry_.find(id.first, NamespaceGeneration{id.second}) == nullptr)
      return broken("hold of an unknown generation", id.first + "@" + std::to_string(id.second));

  for (const auto& [id, p] : purges_) {
    const std::string where = "purge@" + std::to_string(id.value);
    NamespaceId nid;
    if (find_namespace(p.namespace_name, &nid) == nullptr) return broken("purge of an unknown namespace", where);
    const bool open = namespaces_[nid.value].open_purge == id;
    if (open == p.completed()) return broken("purge open state disagrees with its namespace", where);
    if (p.receipts.size() != static_cast<size_t>(p.last_step))
      return broken("purge has " + std::to_string(p.receipts.size()) + " receipts after step " +
                        std::to_string(static_cast<int>(p.last_step)),
                    where);
    const bool advanced = p.last_step >= PurgeStep::advance_generation;
    if (advanced != (p.successor_generation.value == p.purged_generation.value + 1))
      return broken("successor generation is not g+1 exactly after step 2", where);
    if (p.completed() && !p.pending.empty()) return broken("completed purge with pending work", where);
  }
  return Status::success();
}

Sha256Digest NamespaceAuthority::state_digest() const {
  CanonicalWriter w("kvrt.NamespaceAuthority.v1");
  w.digest("registry", registry_.state_digest());
  w.begin_list("namespaces", namespaces_.size());
  for (const NamespaceState& ns : namespaces_)
    w.str("name", ns.name)
        .digest("salt", ns.salt_digest)
        .u8("admitting", ns.admitting)
        .u64("open_purge", ns.open_purge ? ns.open_purge->value : 0);
  w.begin_list("principals", principals_.size());
  for (const auto& [id, p] : principals_) {
    w.u64("id", id.value).str("name", p.name).digest("token_sha256", p.token_sha256).u8("barred", p.barred);
    w.begin_list("namespaces", p.namespaces.size());
    for (NamespaceId n : p.namespaces) w.u32("ns", n.value);
  }
  w.begin_list("grants", grants_.size());
  for (const auto& [id, g] : grants_)
    w.u64("id", id.value)
        .u64("principal", g.principal.value)
        .u32("ns", g.namespace_id.value)
        .u64("generation", g.generation.value);
  w.begin_list("holds", holds_.size());
  for (const auto& [id, h] : holds_)
    w.u64("id", id.value)
        .u8("kind", static_cast<uint8_t>(h.kind))
        .u64("principal", h.principal.value)
        .str("ns", h.namespace_name)
        .u64("generation", h.generation.value)
        .u64("subject", h.subject)
        .u64("ticket", h.ticket.ticket_id);
  w.begin_list("purges", purges_.size());
  for (const auto& [id, p] : purges_) {
    w.u64("id", id.value)
        .str("ns", p.namespace_name)
        .u64("purged", p.purged_generation.value)
        .u64("successor", p.successor_generation.value)
        .u8("last_step", static_cast<uint8_t>(p.last_step));
    w.begin_list("pending", p.pending.size());
    for (const PurgeWorkItem& x : p.pending) w.u64("item", x.id.value);
  }
  w.u64("next_principal", next_principal_id_)
      .u64("next_grant", next_grant_id_)
      .u64("next_hold", next_hold_id_)
      .u64("next_purge", next_purge_id_)
      .u64("next_work", next_work_id_);
  return w.finish();
}

}  // namespace kvrt
