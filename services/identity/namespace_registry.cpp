#include "services/identity/namespace_registry.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "services/identity/compatibility_check.hpp"
#include "services/identity/isolation_namespace.hpp"

namespace kvrt {
namespace {

// The equality-bearing fields a namespace generation fixes; the covered
// tokens, side inputs and publication generation belong to each request.
constexpr std::array<CompatibilityField, 9> kGenerationFields{
    CompatibilityField::cache_abi_sha256,
    CompatibilityField::cache_layout_sha256,
    CompatibilityField::model_generation,
    CompatibilityField::adapter_identity,
    CompatibilityField::weight_transform_identity,
    CompatibilityField::position_contract_sha256,
    CompatibilityField::cache_isolation_namespace,
    CompatibilityField::namespace_generation,
    CompatibilityField::cache_salt,
};

CacheCompatibilityManifest generation_template(const GenerationRecord& r) {
  CacheCompatibilityManifest m;
  m.cache_abi_sha256 = r.facts.layout.logical_cache_abi_sha256;
  m.cache_layout_sha256 = r.layout_sha256;
  m.model_generation = r.facts.layout.model_generation;
  m.adapter_identity = r.facts.artifact.adapter_identity;
  m.weight_transform_identity = r.facts.artifact.weight_transform_identity;
  m.position_contract_sha256 = r.facts.artifact.position_contract_sha256;
  m.cache_isolation_namespace = namespace_name(r.isolation);
  m.namespace_generation = r.isolation.generation;
  m.cache_salt = r.isolation.cache_salt;
  return m;
}

GenerationRecord make_record(const CacheIsolationNamespace& isolation, const GenerationFacts& facts,
                             std::optional<InvalidationCause> cause) {
  GenerationRecord r;
  r.isolation = isolation;
  r.facts = facts;
  r.layout_sha256 = facts.layout.digest();
  r.created_by = cause;
  return r;
}

Error unknown_namespace(std::string_view name) {
  return make_error(ErrorCode::invalid_argument, "unknown cache namespace \"" + std::string(name) + "\"",
                    "cache_isolation_namespace");
}

std::string gen_text(NamespaceGeneration g) { return std::to_string(g.value); }

}  // namespace

std::string_view to_string(GenerationState s) {
  switch (s) {
    case GenerationState::current:
      return "current";
    case GenerationState::frozen:
      return "frozen";
    case GenerationState::reclaimed:
      return "reclaimed";
  }
  return "unknown_generation_state";
}

Status CacheNamespaceRegistry::create(const CacheIsolationNamespace& initial, const GenerationFacts& facts) {
  KVRT_TRY(validate_isolation_namespace(initial));
  KVRT_TRY(validate_generation_facts(facts));
  if (initial.model_cache_generation != facts.layout.model_generation)
    return make_error(ErrorCode::invalid_argument,
                      "namespace model_cache_generation " + std::to_string(initial.model_cache_generation) +
                          " is not the layout's model_generation " + std::to_string(facts.layout.model_generation),
                      "model_cache_generation");
  std::string name = namespace_name(initial);
  if (namespaces_.contains(name))
    return make_error(ErrorCode::invalid_argument, "cache namespace \"" + name + "\" is already registered",
                      "cache_isolation_namespace");
  NamespaceEntry entry;
  entry.generations.push_back(make_record(initial, facts, std::nullopt));
  namespaces_.emplace(std::move(name), std::move(entry));
  return Status::success();
}

Result<AdmissionTicket> CacheNamespaceRegistry::admit(std::string_view name) {
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) return unknown_namespace(name);
  auto& record = it->second.generations.back();
  const uint64_t id = next_ticket_id_++;
  record.live_admissions.insert(id);
  return AdmissionTicket{it->first, record.generation(), id};
}

Status CacheNamespaceRegistry::release(const AdmissionTicket& ticket) {
  auto it = namespaces_.find(ticket.namespace_name);
  if (it == namespaces_.end()) return unknown_namespace(ticket.namespace_name);
  auto& gens = it->second.generations;
  auto rec = std::find_if(gens.begin(), gens.end(), [&](const auto& r) { return r.generation() == ticket.generation; });
  if (rec == gens.end() || !rec->live_admissions.contains(ticket.ticket_id))
    return make_error(ErrorCode::invalid_argument,
                      "admission " + std::to_string(ticket.ticket_id) + " of \"" + ticket.namespace_name +
                          "\" generation " + gen_text(ticket.generation) +
                          " is not live (released twice or never admitted)",
                      "ticket");
  rec->live_admissions.erase(ticket.ticket_id);
  if (rec->state == GenerationState::frozen && rec->live_admissions.empty()) {
    rec->state = GenerationState::reclaimed;
    pending_reclamations_.push_back({it->first, rec->generation()});
  }
  return Status::success();
}

Result<InvalidationReceipt> CacheNamespaceRegistry::invalidate(std::string_view name, InvalidationCause cause,
                                                               const GenerationFacts& successor) {
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) return unknown_namespace(name);
  auto& entry = it->second;
  const GenerationRecord& old = entry.generations.back();
  KVRT_TRY(check_invalidation(cause, old.facts, successor));
  if (old.generation().value == std::numeric_limits<uint64_t>::max())
    return make_error(ErrorCode::invalid_argument, "namespace generation cannot advance past 2^64-1",
                      "namespace_generation");

  // Everything is derived before anything is mutated: an error above leaves
  // the registry exactly as it was.
  CacheIsolationNamespace next_isolation = old.isolation;
  next_isolation.generation = NamespaceGeneration{old.generation().value + 1};
  next_isolation.model_cache_generation = successor.layout.model_generation;
  GenerationRecord next = make_record(next_isolation, successor, cause);

  InvalidationReceipt receipt;
  receipt.namespace_name = it->first;
  receipt.cause = cause;
  receipt.old_generation = old.generation();
  receipt.new_generation = next.generation();
  receipt.old_model_generation = old.facts.layout.model_generation;
  receipt.new_model_generation = successor.layout.model_generation;
  receipt.old_layout_sha256 = old.layout_sha256;
  receipt.new_layout_sha256 = next.layout_sha256;
  receipt.old_namespace_sha256 = isolation_namespace_digest(old.isolation);
  receipt.new_namespace_sha256 = isolation_namespace_digest(next_isolation);
  receipt.changed_facts = changed_facts(old.facts, successor);
  receipt.old_live_admissions = old.live_admissions.size();
  receipt.old_reclaimed = old.live_admissions.empty();

  GenerationRecord& frozen = entry.generations.back();
  frozen.state = receipt.old_reclaimed ? GenerationState::reclaimed : GenerationState::frozen;
  if (receipt.old_reclaimed) pending_reclamations_.push_back({it->first, frozen.generation()});
  entry.generations.push_back(std::move(next));
  entry.history.push_back(receipt);
  return receipt;
}

Result<CacheCompatibilityManifest> CacheNamespaceRegistry::manifest_for(const AdmissionTicket& ticket,
                                                                        const CoveredInput& input) const {
  const GenerationRecord* rec = find(ticket.namespace_name, ticket.generation);
  if (rec == nullptr || !rec->live_admissions.contains(ticket.ticket_id))
    return make_error(ErrorCode::invalid_argument,
                      "admission " + std::to_string(ticket.ticket_id) + " of \"" + ticket.namespace_name +
                          "\" generation " + gen_text(ticket.generation) + " is not live",
                      "ticket");
  return build_compatibility_manifest(rec->facts.layout, rec->facts.artifact, rec->isolation, input);
}

Result<const GenerationRecord*> CacheNamespaceRegistry::resolve_current(const CacheCompatibilityManifest& m,
                                                                        std::string_view action) const {
  auto it = namespaces_.find(m.cache_isolation_namespace);
  if (it == namespaces_.end()) return unknown_namespace(m.cache_isolation_namespace);
  const auto& current = it->second.generations.back();
  const GenerationRecord* rec = find(it->first, m.namespace_generation);
  if (rec == nullptr)
    return make_error(ErrorCode::invalid_argument,
                      "cache namespace \"" + it->first + "\" has no generation " + gen_text(m.namespace_generation) +
                          " (current " + gen_text(current.generation()) + ")",
                      "namespace_generation");
  if (rec->state != GenerationState::current)
    return make_error(ErrorCode::stale_generation,
                      std::string(action) + " against " + std::string(to_string(rec->state)) + " generation " +
                          gen_text(rec->generation()) + " of \"" + it->first + "\"; only the current generation " +
                          gen_text(current.generation()) + " is served",
                      "namespace_generation");
  return &current;
}

Status CacheNamespaceRegistry::authorize(const CacheCompatibilityManifest& m, std::string_view action) const {
  // 0x01A legal order: a well-formed request enters its namespace (1), then
  // its ABI and layout generation are validated (2), before any key is derived.
  KVRT_TRY(validate_compatibility_manifest(m));
  const GenerationRecord* current = nullptr;
  KVRT_TRY_ASSIGN(current, resolve_current(m, action));
  // Authorization strictly before compatibility (0x0CE "Authorization
  // Before Lookup"): the namespace and its generation (above), then the
  // salt, the tenant's credential. A consumer refused here is told which of
  // its own fields failed and nothing of the generation's facts: not the
  // layout or ABI it would have been compared with, not the salt's
  // fingerprint, whatever else in its manifest is also wrong.
  if (m.cache_salt != current->isolation.cache_salt)
    return make_error(ErrorCode::incompatible,
                      std::string(action) + " refused: the manifest's cache salt is not the salt of \"" +
                          m.cache_isolation_namespace + "\"",
                      "cache_salt");
  auto verdict = compatible_on(kGenerationFields, generation_template(*current), m);
  if (verdict.ok()) return Status::success();
  Error e = verdict.error;
  e.reason = std::string(action) + " does not match current generation " + gen_text(current->generation()) +
             " (producer = the generation's facts, consumer = the manifest): " + e.reason;
  return e;
}

Status CacheNamespaceRegistry::authorize_lookup(const CacheCompatibilityManifest& m) const {
  return authorize(m, "lookup");
}

Status CacheNamespaceRegistry::authorize_publication(const CacheCompatibilityManifest& m) const {
  return authorize(m, "publication");
}

const GenerationRecord* CacheNamespaceRegistry::current(std::string_view name) const {
  auto it = namespaces_.find(name);
  return it == namespaces_.end() ? nullptr : &it->second.generations.back();
}

const GenerationRecord* CacheNamespaceRegistry::find(std::string_view name, NamespaceGeneration generation) const {
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) return nullptr;
  for (const auto& r : it->second.generations)
    if (r.generation() == generation) return &r;
  return nullptr;
}

std::vector<InvalidationReceipt> CacheNamespaceRegistry::history(std::string_view name) const {
  auto it = namespaces_.find(name);
  return it == namespaces_.end() ? std::vector<InvalidationReceipt>{} : it->second.history;
}

std::vector<ReclamationRecord> CacheNamespaceRegistry::drain_reclamations() {
  std::vector<ReclamationRecord> out;
  out.swap(pending_reclamations_);
  return out;
}

}  // namespace kvrt
