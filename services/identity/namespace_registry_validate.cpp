// CacheNamespaceRegistry::validate() and state_digest(): the full
// re-derivation of the registry's invariants (docs/conventions.md habit 2), kept apart
// from the transitions in namespace_registry.cpp.
#include <set>
#include <utility>

#include "services/identity/isolation_namespace.hpp"
#include "services/identity/namespace_registry.hpp"

namespace kvrt {
namespace {

Error broken(const std::string& where, std::string what) {
  return make_error(ErrorCode::invariant_violated, "registry invariant broken at " + where + ": " + what, where);
}

Status check_receipt(const std::string& where, const InvalidationReceipt& r, const std::string& name,
                     const GenerationRecord& old, const GenerationRecord& next) {
  if (r.namespace_name != name) return broken(where, "receipt names namespace \"" + r.namespace_name + "\"");
  if (r.old_generation != old.generation() || r.new_generation != next.generation())
    return broken(where, "receipt generations " + std::to_string(r.old_generation.value) + "->" +
                             std::to_string(r.new_generation.value) + " do not match records " +
                             std::to_string(old.generation().value) + "->" + std::to_string(next.generation().value));
  if (next.created_by != r.cause) return broken(where, "record cause differs from receipt cause");
  if (r.old_layout_sha256 != old.layout_sha256 || r.new_layout_sha256 != next.layout_sha256)
    return broken(where, "receipt layout digests differ from the records'");
  if (r.old_model_generation != old.facts.layout.model_generation ||
      r.new_model_generation != next.facts.layout.model_generation)
    return broken(where, "receipt model generations differ from the records'");
  if (r.old_namespace_sha256 != isolation_namespace_digest(old.isolation) ||
      r.new_namespace_sha256 != isolation_namespace_digest(next.isolation))
    return broken(where, "receipt namespace digests differ from the records'");
  if (r.changed_facts != changed_facts(old.facts, next.facts))
    return broken(where, "receipt changed_facts differ from a re-derivation");
  // The successor must still be a legal invalidation of its predecessor.
  if (auto s = check_invalidation(r.cause, old.facts, next.facts); !s.ok())
    return broken(where, "successor is not a legal invalidation: " + s.error().describe());
  return Status::success();
}

}  // namespace

Status CacheNamespaceRegistry::validate() const {
  std::set<uint64_t> tickets;
  for (const auto& [name, entry] : namespaces_) {
    const auto& gens = entry.generations;
    if (gens.empty()) return broken(name, "namespace has no generation");
    if (entry.history.size() != gens.size() - 1)
      return broken(
          name, std::to_string(entry.history.size()) + " receipts for " + std::to_string(gens.size()) + " generations");
    for (size_t i = 0; i < gens.size(); ++i) {
      const auto& r = gens[i];
      const std::string where = name + "@" + std::to_string(r.generation().value);
      if (auto s = validate_isolation_namespace(r.isolation); !s.ok()) return broken(where, s.error().describe());
      if (namespace_name(r.isolation) != name)
        return broken(where, "record names namespace \"" + namespace_name(r.isolation) + "\"");
      if (auto s = validate_generation_facts(r.facts); !s.ok()) return broken(where, s.error().describe());
      if (r.layout_sha256 != r.facts.layout.digest()) return broken(where, "cached layout digest is stale");
      if (r.isolation.model_cache_generation != r.facts.layout.model_generation)
        return broken(where, "model_cache_generation differs from the layout's model_generation");
      const bool newest = i + 1 == gens.size();
      if ((r.state == GenerationState::current) != newest)
        return broken(where, std::string(to_string(r.state)) + " but " + (newest ? "newest" : "not newest"));
      if (r.state == GenerationState::frozen && r.live_admissions.empty())
        return broken(where, "frozen with no live admission (should be reclaimed)");
      if (r.state == GenerationState::reclaimed && !r.live_admissions.empty())
        return broken(where, "reclaimed with " + std::to_string(r.live_admissions.size()) + " live admissions");
      for (uint64_t t : r.live_admissions) {
        if (t == 0 || t >= next_ticket_id_) return broken(where, "ticket " + std::to_string(t) + " never issued");
        if (!tickets.insert(t).second) return broken(where, "ticket " + std::to_string(t) + " held twice");
      }
      if (i == 0) {
        if (r.created_by.has_value()) return broken(where, "first generation records an invalidation cause");
        continue;
      }
      if (r.generation() <= gens[i - 1].generation())
        return broken(where, "generation does not increase past " + std::to_string(gens[i - 1].generation().value));
      KVRT_TRY(check_receipt(where, entry.history[i - 1], name, gens[i - 1], r));
    }
  }
  std::set<std::pair<std::string, uint64_t>> queued;
  for (const auto& rec : pending_reclamations_) {
    const std::string where = rec.namespace_name + "@" + std::to_string(rec.generation.value);
    const GenerationRecord* r = find(rec.namespace_name, rec.generation);
    if (r == nullptr || r->state != GenerationState::reclaimed)
      return broken(where, "queued reclamation of a generation that is not reclaimed");
    if (!queued.emplace(rec.namespace_name, rec.generation.value).second)
      return broken(where, "reclamation queued twice");
  }
  return Status::success();
}

Sha256Digest CacheNamespaceRegistry::state_digest() const {
  CanonicalWriter w("kvrt.CacheNamespaceRegistry.state.v1");
  w.u64("next_ticket_id", next_ticket_id_).begin_list("namespaces", namespaces_.size());
  for (const auto& [name, entry] : namespaces_) {
    w.str("name", name).begin_list("generations", entry.generations.size());
    for (const auto& r : entry.generations) {
      w.digest("isolation", isolation_namespace_digest(r.isolation))
          .digest("layout", r.layout_sha256)
          .str("adapter_identity", r.facts.artifact.adapter_identity)
          .str("weight_transform_identity", r.facts.artifact.weight_transform_identity)
          .str("position_contract_sha256", r.facts.artifact.position_contract_sha256)
          .u8("state", static_cast<uint8_t>(r.state))
          .u8("created_by", r.created_by ? static_cast<uint8_t>(*r.created_by) : uint8_t{0xFF})
          .begin_list("live_admissions", r.live_admissions.size());
      for (uint64_t t : r.live_admissions) w.u64("ticket", t);
    }
    w.begin_list("history", entry.history.size());
    for (const auto& h : entry.history) {
      w.u8("cause", static_cast<uint8_t>(h.cause))
          .u64("old_generation", h.old_generation.value)
          .u64("new_generation", h.new_generation.value)
          .u64("old_live_admissions", h.old_live_admissions)
          .u8("old_reclaimed", h.old_reclaimed ? 1 : 0)
          .begin_list("changed_facts", h.changed_facts.size());
      for (const auto& f : h.changed_facts) w.str("fact", f);
    }
  }
  w.begin_list("pending_reclamations", pending_reclamations_.size());
  for (const auto& rec : pending_reclamations_)
    w.str("namespace", rec.namespace_name).u64("generation", rec.generation.value);
  return w.finish();
}

}  // namespace kvrt
