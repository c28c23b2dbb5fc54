// Invalidation on its own (0x01A "Invalidation Produces A Successor
// Namespace"), as a weight refit or an adapter swap needs it: unlike a purge
// (namespace_purge.cpp) it does not stop admission and waits for nothing.
// The old generation's bytes stay where they are; nothing can reach them by
// a new lookup, because every key of the index hashes the generation, and
// the requests that hold them finish on them.
#include <algorithm>

#include "services/authorization/namespace_authority.hpp"

namespace kvrt {

std::vector<GrantId> NamespaceAuthority::end_namespace_grants(NamespaceId ns) {
  std::vector<GrantId> ended;
  for (const auto& [gid, grant] : grants_)
    if (grant.namespace_id == ns) ended.push_back(gid);
  for (GrantId gid : ended) end_grant(gid);
  return ended;
}

Result<NamespaceInvalidation> NamespaceAuthority::invalidate(std::string_view name, InvalidationCause cause,
                                                             const GenerationFacts& successor) {
  NamespaceId nid;
  const NamespaceState* ns = find_namespace(name, &nid);
  if (ns == nullptr)
    return make_error(ErrorCode::authorization_unknown_namespace,
                      "no cache namespace \"" + std::string(name) + "\" is configured", "namespace");
  if (ns->open_purge)
    return make_error(ErrorCode::authorization_purge_pending,
                      "purge " + std::to_string(ns->open_purge->value) + " of \"" + ns->name +
                          "\" is open and advances the generation itself",
                      "namespace");
  // The registry checks the successor and changes nothing when it refuses;
  // nothing else has changed yet.
  Result<InvalidationReceipt> inv = registry_.invalidate(ns->name, cause, successor);
  if (!inv.ok()) return inv.error();
  NamespaceInvalidation out;
  out.receipt = std::move(inv).value();
  out.ended_grants = end_namespace_grants(nid);
  return out;
}

Result<NamespaceStanding> NamespaceAuthority::standing(std::string_view name) const {
  NamespaceId nid;
  const NamespaceState* ns = find_namespace(name, &nid);
  if (ns == nullptr)
    return make_error(ErrorCode::authorization_unknown_namespace,
                      "no cache namespace \"" + std::string(name) + "\" is configured", "namespace");
  const GenerationRecord* current = registry_.current(ns->name);
  KVRT_ASSERT(current != nullptr, "authority namespace missing from its registry: " + ns->name);
  NamespaceStanding s;
  s.namespace_name = ns->name;
  s.generation = current->generation();
  s.model_generation = current->facts.layout.model_generation;
  s.admitting = ns->admitting;
  s.open_purge = ns->open_purge;
  s.live_grants = static_cast<uint32_t>(
      std::count_if(grants_.begin(), grants_.end(), [&](const auto& g) { return g.second.namespace_id == nid; }));
  const std::vector<InvalidationReceipt> history = registry_.history(ns->name);
  s.invalidations = static_cast<uint32_t>(history.size());
  if (!history.empty()) s.last_cause = history.back().cause;
  for (const InvalidationReceipt& r : history)
    if (const GenerationRecord* old = registry_.find(ns->name, r.old_generation);
        old != nullptr && old->state == GenerationState::frozen)
      s.frozen_generations.push_back(r.old_generation);
  for (const auto& [id, h] : holds_)
    if (h.namespace_name == ns->name) ++(h.kind == HoldKind::lease ? s.lease_holds : s.receipt_holds);
  return s;
}

std::vector<std::string> NamespaceAuthority::namespace_names() const {
  std::vector<std::string> out;
  out.reserve(namespaces_.size());
  for (const NamespaceState& ns : namespaces_) out.push_back(ns.name);
  return out;
}

}  // namespace kvrt
