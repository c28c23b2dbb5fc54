#pragma once
// CacheNamespaceRegistry: cache-isolation namespaces and their generations
// (spec 0x01A "CacheIsolationNamespace", "Invalidation Produces A Successor
// Namespace"). A plain class (docs/architecture.md, cores); the namespace actor holds it.
//
// Invalidation follows the spec's six steps:
//   1. freeze old namespace for its still-live owners  -> old generation: frozen,
//      its admissions stay live and may still build manifests for their own blocks
//   2. stop publishing old entries to new lookups      -> authorize_lookup and
//      authorize_publication reject the old generation (ErrorCode::stale_generation)
//   3. advance model/cache/namespace generation        -> new generation = old + 1,
//      model_cache_generation = successor layout's model_generation
//   4. create a new layout and compatibility manifest  -> successor GenerationFacts;
//      manifest_for() builds manifests against them
//   5. admit new requests only against the successor   -> admit() always answers
//      the current generation
//   6. reclaim old physical state after its legal references reach zero
//      -> the last release() of a frozen generation marks it reclaimed and queues
//      a ReclamationRecord for the allocator (drain_reclamations()).
//
// Invariants (validate()): per namespace the generations strictly increase and
// exactly one, the newest, is current; a frozen generation has at least one live
// admission, a reclaimed one none; every successor is a legal invalidation of
// its predecessor (check_invalidation, re-derived) and matches its receipt.
// Because namespace_generation is equality-bearing, no manifest built against
// an old generation can compare compatible with one built against its successor.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_compatibility_manifest.hpp"
#include "services/identity/compatibility_manifest_builder.hpp"
#include "services/identity/invalidation.hpp"

namespace kvrt {

enum class GenerationState : uint8_t { current = 0, frozen = 1, reclaimed = 2 };
std::string_view to_string(GenerationState s);

// An admitted request's hold on one namespace generation. A value, released
// explicitly; a stale or repeated release is a reported caller error.
struct AdmissionTicket {
  std::string namespace_name;
  NamespaceGeneration generation;
  uint64_t ticket_id = 0;
  friend bool operator==(const AdmissionTicket&, const AdmissionTicket&) = default;
};

// Old physical state that may now be reclaimed (step 6), for the allocator.
struct ReclamationRecord {
  std::string namespace_name;
  NamespaceGeneration generation;
  friend bool operator==(const ReclamationRecord&, const ReclamationRecord&) = default;
};

struct GenerationRecord {
  CacheIsolationNamespace isolation;  // isolation.generation is this record's generation
  GenerationFacts facts;
  Sha256Digest layout_sha256;  // facts.layout.digest()
  GenerationState state = GenerationState::current;
  std::set<uint64_t> live_admissions;           // ticket ids holding this generation
  std::optional<InvalidationCause> created_by;  // nullopt for the namespace's first generation

  NamespaceGeneration generation() const { return isolation.generation; }
};

class CacheNamespaceRegistry {
 public:
  // Registers a namespace at initial.generation. Errors: invalid namespace or
  // facts, a namespace model_cache_generation that is not the layout's
  // model_generation, or a name already registered.
  Status create(const CacheIsolationNamespace& initial, const GenerationFacts& facts);

  // Admits a request against the current generation (step 5).
  Result<AdmissionTicket> admit(std::string_view name);
  // Ends an admission; the last release of a frozen generation reclaims it.
  Status release(const AdmissionTicket& ticket);

  // Steps 1-4 and, when the old generation has no live admission, 6.
  // On error the registry is unchanged.
  Result<InvalidationReceipt> invalidate(std::string_view name, InvalidationCause cause,
                                         const GenerationFacts& successor);

  // A manifest for a live admission, built against the admission's generation
  // (which is frozen if the namespace has since been invalidated).
  Result<CacheCompatibilityManifest> manifest_for(const AdmissionTicket& ticket, const CoveredInput& input) const;

  // Legal order of 0x01A, steps 1-2: the manifest is well formed, names a
  // registered namespace, its generation is current (a frozen or reclaimed one
  // is ErrorCode::stale_generation), and its ABI, layout, model, adapter,
  // transform, position and salt facts are those of the current generation
  // (ErrorCode::incompatible, first failing field in spec order).
  Status authorize_lookup(const CacheCompatibilityManifest& m) const;
  // The same gate for publishing an entry: a frozen generation never publishes.
  Status authorize_publication(const CacheCompatibilityManifest& m) const;

  const GenerationRecord* current(std::string_view name) const;
  const GenerationRecord* find(std::string_view name, NamespaceGeneration generation) const;
  // Receipts of every invalidation of a namespace, oldest first (empty if unknown).
  std::vector<InvalidationReceipt> history(std::string_view name) const;
  size_t namespace_count() const { return namespaces_.size(); }

  // Reclamations queued since the last drain, in the order they happened.
  std::vector<ReclamationRecord> drain_reclamations();

  // Re-derives every invariant listed above from scratch; a broken one is
  // ErrorCode::invariant_violated (a kvrt bug) with field "namespace@generation".
  Status validate() const;
  // Canonical digest of the whole state: a rejected operation leaves it unchanged.
  Sha256Digest state_digest() const;

 private:
  struct NamespaceEntry {
    std::vector<GenerationRecord> generations;  // ascending; back() is current
    std::vector<InvalidationReceipt> history;   // history[i]: generations[i] -> generations[i+1]
  };
  Result<const GenerationRecord*> resolve_current(const CacheCompatibilityManifest& m, std::string_view action) const;
  Status authorize(const CacheCompatibilityManifest& m, std::string_view action) const;

  std::map<std::string, NamespaceEntry, std::less<>> namespaces_;
  uint64_t next_ticket_id_ = 1;
  std::vector<ReclamationRecord> pending_reclamations_;
};

}  // namespace kvrt
