// NamespaceAuthority's purge protocol (spec 0x0CE "Revocation And Purge");
// the steps are described in namespace_purge.hpp.
#include <algorithm>

#include "services/authorization/namespace_authority.hpp"

namespace kvrt {
namespace {

Error pending(const PurgeProgress& p, PurgeStep step, std::string what) {
  return make_error(ErrorCode::authorization_purge_pending,
                    "purge " + std::to_string(p.id.value) + " of \"" + p.namespace_name + "\" generation " +
                        std::to_string(p.purged_generation.value) + " cannot " + std::string(to_string(step)) +
                        " yet: " + what,
                    "purge");
}

std::string describe_pending(const std::vector<PurgeWorkItem>& items) {
  std::string out = std::to_string(items.size()) + " work item(s) unacknowledged:";
  for (const PurgeWorkItem& w : items)
    out.append(" ")
        .append(to_string(w.kind))
        .append("@")
        .append(w.owner)
        .append("#")
        .append(std::to_string(w.id.value));
  return out;
}

Status check_owner_names(const std::vector<std::string>& names, const char* field) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty() || std::count(names.begin(), names.end(), names[i]) > 1)
      return make_error(ErrorCode::invalid_argument, "owner names must be non-empty and distinct",
                        std::string(field) + "[" + std::to_string(i) + "]");
  return Status::success();
}

}  // namespace

std::string_view to_string(PurgeStep s) {
  switch (s) {
    case PurgeStep::stop_admitting:
      return "stop_admitting";
    case PurgeStep::advance_generation:
      return "advance_generation";
    case PurgeStep::invalidate_index:
      return "invalidate_index";
    case PurgeStep::drain_leases:
      return "drain_leases";
    case PurgeStep::release_physical:
      return "release_physical";
    case PurgeStep::remove_external_copies:
      return "remove_external_copies";
    case PurgeStep::complete:
      return "complete";
  }
  return "unknown_purge_step";
}

std::string_view to_string(PurgeWorkKind k) {
  switch (k) {
    case PurgeWorkKind::drop_index_entries:
      return "drop_index_entries";
    case PurgeWorkKind::cancel_lease:
      return "cancel_lease";
    case PurgeWorkKind::release_physical_objects:
      return "release_physical_objects";
    case PurgeWorkKind::remove_external_copies:
      return "remove_external_copies";
  }
  return "unknown_purge_work_kind";
}

std::string_view to_string(PhysicalReleaseMode m) {
  switch (m) {
    case PhysicalReleaseMode::release:
      return "release";
    case PhysicalReleaseMode::overwrite:
      return "overwrite";
  }
  return "unknown_physical_release_mode";
}

Result<PurgeStepReceipt> NamespaceAuthority::begin_purge(std::string_view name, const PurgeRequest& request) {
  NamespaceId nid;
  const NamespaceState* ns = find_namespace(name, &nid);
  if (ns == nullptr)
    return make_error(ErrorCode::authorization_unknown_namespace,
                      "no cache namespace \"" + std::string(name) + "\" is configured", "namespace");
  if (ns->open_purge)
    return make_error(ErrorCode::authorization_purge_pending,
                      "purge " + std::to_string(ns->open_purge->value) + " of \"" + ns->name + "\" is still open",
                      "namespace");
  // Everything step 2 will need is checked now, so a purge never stops
  // admitting a namespace it cannot advance.
  const GenerationRecord* current = registry_.current(ns->name);
  KVRT_TRY(check_invalidation(request.cause, current->facts, request.successor));
  KVRT_TRY(check_owner_names(request.index_owners, "index_owners"));
  KVRT_TRY(check_owner_names(request.physical_owners, "physical_owners"));
  KVRT_TRY(check_owner_names(request.external_tiers, "external_tiers"));

  PurgeProgress p;
  p.id = PurgeId{next_purge_id_++};
  p.namespace_name = ns->name;
  p.purged_generation = current->generation();
  p.request = request;
  p.last_step = PurgeStep::stop_admitting;
  PurgeStepReceipt r;
  r.purge = p.id;
  r.step = PurgeStep::stop_admitting;
  r.namespace_name = ns->name;
  r.purged_generation = p.purged_generation;
  r.live_leases = live_holds(ns->name, p.purged_generation, HoldKind::lease);
  r.live_receipts = live_holds(ns->name, p.purged_generation, HoldKind::executable_receipt);
  p.receipts.push_back(r);
  namespaces_[nid.value].admitting = false;
  namespaces_[nid.value].open_purge = p.id;
  purges_.emplace(p.id, std::move(p));
  return r;
}

Result<PurgeStepReceipt> NamespaceAuthority::advance_purge(PurgeId id) {
  auto it = purges_.find(id);
  if (it == purges_.end())
    return make_error(ErrorCode::invalid_argument, "purge " + std::to_string(id.value) + " does not exist", "purge");
  PurgeProgress& p = it->second;
  if (p.completed())
    return make_error(ErrorCode::invalid_argument, "purge " + std::to_string(id.value) + " is already complete",
                      "purge");
  NamespaceId nid;
  KVRT_ASSERT(find_namespace(p.namespace_name, &nid) != nullptr, "purge of an unknown namespace");
  const auto next = static_cast<PurgeStep>(static_cast<uint8_t>(p.last_step) + 1);
  return purge_step(p, nid, next);
}

Result<PurgeStepReceipt> NamespaceAuthority::purge_step(PurgeProgress& p, NamespaceId nid, PurgeStep step) {
  NamespaceState& ns = namespaces_[nid.value];
  const NamespaceGeneration g = p.purged_generation;
  PurgeStepReceipt r;
  r.purge = p.id;
  r.step = step;
  r.namespace_name = p.namespace_name;
  r.purged_generation = g;
  const uint64_t leases = live_holds(p.namespace_name, g, HoldKind::lease);
  const uint64_t receipts = live_holds(p.namespace_name, g, HoldKind::executable_receipt);
  auto make_item = [&](PurgeWorkKind kind, const std::string& owner) {
    PurgeWorkItem w;
    w.id = next_work_id();
    w.kind = kind;
    w.owner = owner;
    w.namespace_name = p.namespace_name;
    w.generation = g;
    w.physical_mode = p.request.physical_mode;
    return w;
  };

  switch (step) {
    case PurgeStep::stop_admitting:
      KVRT_ASSERT(false, "step 1 is begin_purge");
      break;
    case PurgeStep::advance_generation: {
      // The registry leaves itself unchanged on error, and nothing else has
      // changed yet.
      auto inv = registry_.invalidate(p.namespace_name, p.request.cause, p.request.successor);
      if (!inv.ok()) return inv.error();
      end_namespace_grants(nid);
      ns.admitting = true;  // g+1 admits from here on (0x01A step 5)
      p.successor_generation = inv->new_generation;
      r.invalidation = std::move(inv).value();
      break;
    }
    case PurgeStep::invalidate_index:
      for (const std::string& owner : p.request.index_owners)
        r.work_items.push_back(make_item(PurgeWorkKind::drop_index_entries, owner));
      break;
    case PurgeStep::drain_leases:
      if (!p.pending.empty()) return pending(p, step, describe_pending(p.pending));
      if (p.request.cancel_live_leases)
        for (const auto& [hid, h] : holds_)
          if (h.kind == HoldKind::lease && h.generation == g && h.namespace_name == p.namespace_name) {
            PurgeWorkItem w = make_item(PurgeWorkKind::cancel_lease, "principal " + std::to_string(h.principal.value));
            w.hold = hid;
            w.subject = h.subject;
            r.work_items.push_back(std::move(w));
          }
      break;
    case PurgeStep::release_physical:
      if (leases != 0) return pending(p, step, std::to_string(leases) + " lease(s) of the generation are live");
      for (const std::string& owner : p.request.physical_owners)
        r.work_items.push_back(make_item(PurgeWorkKind::release_physical_objects, owner));
      break;
    case PurgeStep::remove_external_copies:
      if (!p.pending.empty()) return pending(p, step, describe_pending(p.pending));
      for (const std::string& tier : p.request.external_tiers)
        r.work_items.push_back(make_item(PurgeWorkKind::remove_external_copies, tier));
      break;
    case PurgeStep::complete:
      if (!p.pending.empty()) return pending(p, step, describe_pending(p.pending));
      if (receipts != 0 || leases != 0)
        return pending(p, step,
                       std::to_string(receipts) + " executable receipt(s) and " + std::to_string(leases) +
                           " lease(s) of the generation remain");
      ns.open_purge.reset();
      break;
  }
  r.successor_generation = p.successor_generation;
  r.live_leases = leases;
  r.live_receipts = receipts;
  for (const PurgeWorkItem& w : r.work_items)
    if (w.kind != PurgeWorkKind::cancel_lease) p.pending.push_back(w);
  p.last_step = step;
  p.receipts.push_back(r);
  return r;
}

Status NamespaceAuthority::acknowledge_purge_work(PurgeId id, PurgeWorkId item) {
  auto it = purges_.find(id);
  if (it == purges_.end())
    return make_error(ErrorCode::invalid_argument, "purge " + std::to_string(id.value) + " does not exist", "purge");
  PurgeProgress& p = it->second;
  auto w = std::find_if(p.pending.begin(), p.pending.end(), [&](const PurgeWorkItem& x) { return x.id == item; });
  if (w == p.pending.end()) {
    for (const PurgeStepReceipt& r : p.receipts)
      for (const PurgeWorkItem& x : r.work_items)
        if (x.id == item)
          return make_error(ErrorCode::invalid_argument,
                            x.kind == PurgeWorkKind::cancel_lease
                                ? "a cancel_lease item completes when its hold is released, not by acknowledgement"
                                : "work item " + std::to_string(item.value) + " was already acknowledged",
                            "work_item");
    return make_error(
        ErrorCode::invalid_argument,
        "work item " + std::to_string(item.value) + " does not belong to purge " + std::to_string(id.value),
        "work_item");
  }
  p.pending.erase(w);
  return Status::success();
}

}  // namespace kvrt
