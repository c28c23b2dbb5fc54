#pragma once
// NamespaceAuthority: the namespace / authorization owner's core (docs/architecture.md;
// spec 0x01A "CacheIsolationNamespace", 0x0CE). A plain class; the namespace
// actor holds it. It owns
//   - principals: one bearer token per worker, kept only as its SHA-256,
//     and the namespaces each principal may use (from configuration);
//   - the cache namespaces, through the CacheNamespaceRegistry it holds
//     (generations, salts, successor facts);
//   - grants: principal x namespace x current generation, handed out as
//     AuthorizedLookup capabilities (namespace_grant.hpp);
//   - holds: the live leases and outstanding executable receipts other owners
//     report per generation, which a purge must see drain (0x0CE steps 4, 7);
//   - purges (namespace_purge.hpp).
//
// Invariants (validate()):
//   - every grant names a live principal that may use its namespace, and the
//     namespace's current generation; one grant per (principal, namespace);
//   - token digests are unique; a revoked principal holds no grant;
//   - every hold is one live registry admission of its (namespace,
//     generation), and the authority is the registry's only admitter, so the
//     registry's live admissions equal the holds, generation by generation;
//   - a namespace stops admitting exactly while a purge sits at step 1;
//     at most one purge per namespace is open;
//   - the registry's own validate() holds.
// Every operation that fails leaves state_digest() unchanged.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "services/authorization/authorization_config.hpp"
#include "services/authorization/bearer_token.hpp"
#include "services/authorization/namespace_grant.hpp"
#include "services/authorization/namespace_purge.hpp"
#include "services/identity/namespace_registry.hpp"

namespace kvrt {

// A token the node generated at start-up, to hand to its worker once.
struct IssuedToken {
  std::string principal_name;
  PrincipalId principal;
  BearerToken token;
};

// What a hold stands for (0x0CE purge steps 4 and 7).
enum class HoldKind : uint8_t {
  lease = 0,               // a live lease on an index path or physical object of the generation
  executable_receipt = 1,  // an ExecutableReuseReceipt not yet released or published
};
std::string_view to_string(HoldKind k);

struct HoldRecord {
  HoldKind kind = HoldKind::lease;
  PrincipalId principal;
  std::string namespace_name;
  NamespaceGeneration generation;
  uint64_t subject = 0;    // the caller's id of the thing held (LeaseId value, request id, ...)
  AdmissionTicket ticket;  // the registry admission that keeps the generation from being reclaimed
};

// Receipt of ending a principal's grants (worker disconnected or died) and,
// for revoke_principal, of barring its token.
struct PrincipalEndReceipt {
  PrincipalId principal;
  std::string principal_name;
  bool token_barred = false;
  std::vector<GrantId> ended_grants;
  // Holds the principal still has: the owners must cancel them through their
  // normal operations and report each with release_hold.
  std::vector<HoldId> outstanding_holds;
};

// What invalidate() did (0x01A): the registry's receipt, and the grants of
// the old generation that ended with it.
struct NamespaceInvalidation {
  InvalidationReceipt receipt;
  std::vector<GrantId> ended_grants;
};

// Where one namespace stands, for operators (`kvrt admin status`).
struct NamespaceStanding {
  std::string namespace_name;
  NamespaceGeneration generation;  // the current one
  uint64_t model_generation = 0;   // the current generation's layout's
  bool admitting = true;
  std::optional<PurgeId> open_purge;
  uint32_t live_grants = 0;                             // grants of the current generation [grants]
  std::vector<NamespaceGeneration> frozen_generations;  // older generations someone still holds
  uint64_t lease_holds = 0;                             // every generation [holds]
  uint64_t receipt_holds = 0;                           // every generation [holds]
  uint32_t invalidations = 0;                           // successors made, purges' included
  std::optional<InvalidationCause> last_cause;
};

class NamespaceAuthority {
 public:
  // Registers every configured namespace with `facts` (the node's layout and
  // artifact identity), draws a 128-bit salt where the config has none, and
  // issues a 128-bit token to every principal without token_sha256.
  static Result<NamespaceAuthority> create(const AuthorizationConfig& config, const GenerationFacts& facts);

  // The tokens issued by create(), once; afterwards only digests remain.
  std::vector<IssuedToken> take_issued_tokens();

  // --- authentication and authorization (0x0CE "Authorization Before Lookup")
  // Compares the token's digest with every principal's in constant time, so
  // the answer's timing does not depend on which principal (if any) matched.
  Result<PrincipalId> authenticate(const BearerToken& token) const;
  Result<PrincipalId> authenticate_hex(std::string_view token_hex) const;

  // A capability for `namespace_name` at its current generation; the grant is
  // reused while it lives. Errors, in this order: unknown principal
  // (unauthenticated), revoked, unknown namespace, namespace not granted to
  // the principal, namespace closed by a purge.
  Result<AuthorizedLookup> authorize(PrincipalId principal, std::string_view namespace_name);
  // Does the capability still hold now? Errors: principal_revoked,
  // stale_generation (the namespace moved on), namespace_closed, grant_ended.
  Status check(const AuthorizedLookup& lookup) const;
  // The wire path: a NamespaceGrant value is only a claim until it matches a
  // live grant field for field.
  Result<AuthorizedLookup> verify_claim(const NamespaceGrant& claim) const;

  // --- holds (reported by the owners that lease objects or issue receipts)
  // The capability must pass check(): a closed or stale generation takes no
  // new hold, so purge step 4 and 7 terminate.
  Result<HoldId> record_hold(const AuthorizedLookup& lookup, HoldKind kind, uint64_t subject);
  Status release_hold(HoldId hold);
  uint64_t live_holds(std::string_view namespace_name, NamespaceGeneration generation, HoldKind kind) const;
  const HoldRecord* hold(HoldId id) const;

  // --- principal lifecycle
  // Worker disconnected or died: every grant ends; the token still authenticates
  // (a restarted worker may reconnect).
  Result<PrincipalEndReceipt> end_principal_grants(PrincipalId principal);
  // As above, and the token no longer authenticates.
  Result<PrincipalEndReceipt> revoke_principal(PrincipalId principal);

  // --- invalidation without a purge (0x01A; namespace_invalidate.cpp)
  // The successor generation becomes current and every grant of the old one
  // ends; holds on the old one stay until released (its requests finish on
  // its K/V). Errors, with nothing changed: unknown namespace, a purge open
  // on it (the purge advances the generation itself), and the registry's
  // (check_invalidation: the successor must change what the cause owns).
  Result<NamespaceInvalidation> invalidate(std::string_view namespace_name, InvalidationCause cause,
                                           const GenerationFacts& successor);
  Result<NamespaceStanding> standing(std::string_view namespace_name) const;
  std::vector<std::string> namespace_names() const;  // in configuration order

  // --- purge (0x0CE steps 1-7; namespace_purge.cpp)
  Result<PurgeStepReceipt> begin_purge(std::string_view namespace_name, const PurgeRequest& request);  // step 1
  Result<PurgeStepReceipt> advance_purge(PurgeId purge);  // the next step, when ready
  Status acknowledge_purge_work(PurgeId purge, PurgeWorkId item);
  const PurgeProgress* purge(PurgeId id) const;

  // --- queries
  const CacheNamespaceRegistry& registry() const { return registry_; }
  std::optional<NamespaceId> namespace_id(std::string_view name) const;
  std::optional<PrincipalId> principal_id(std::string_view name) const;
  bool admitting(std::string_view namespace_name) const;
  size_t live_grants() const { return grants_.size(); }
  // Old generations the allocator may now reclaim (registry step 6 of 0x01A).
  std::vector<ReclamationRecord> drain_reclamations() { return registry_.drain_reclamations(); }

  Status validate() const;            // namespace_authority_validate.cpp
  Sha256Digest state_digest() const;  // canonical: a failed operation leaves it unchanged

 private:
  struct Principal {
    std::string name;
    Sha256Digest token_sha256;
    std::set<NamespaceId> namespaces;
    bool barred = false;
    std::set<GrantId> grants;
  };
  struct NamespaceState {
    std::string name;
    Sha256Digest salt_digest;
    bool admitting = true;
    std::optional<PurgeId> open_purge;
  };
  struct GrantRecord {
    PrincipalId principal;
    NamespaceId namespace_id;
    NamespaceGeneration generation;
  };

  NamespaceAuthority() = default;
  const NamespaceState* find_namespace(std::string_view name, NamespaceId* id_out = nullptr) const;
  NamespaceGeneration current_generation(const NamespaceState& ns) const;
  NamespaceGrant grant_value(GrantId id, const GrantRecord& g) const;
  void end_grant(GrantId id);
  Result<PrincipalEndReceipt> end_principal(PrincipalId principal, bool bar);
  PurgeWorkId next_work_id() { return PurgeWorkId{next_work_id_++}; }
  // Ends every grant of the namespace (its generation moved on); returns them.
  std::vector<GrantId> end_namespace_grants(NamespaceId ns);
  // Purge steps 2-7 (namespace_purge.cpp); each checks its precondition
  // before it changes anything.
  Result<PurgeStepReceipt> purge_step(PurgeProgress& p, NamespaceId ns, PurgeStep step);

  CacheNamespaceRegistry registry_;
  std::vector<NamespaceState> namespaces_;  // index = NamespaceId
  std::map<PrincipalId, Principal> principals_;
  std::map<GrantId, GrantRecord> grants_;
  std::map<std::pair<PrincipalId, NamespaceId>, GrantId> grant_by_principal_namespace_;
  std::map<HoldId, HoldRecord> holds_;
  std::map<PurgeId, PurgeProgress> purges_;
  std::vector<IssuedToken> issued_tokens_;
  uint64_t next_principal_id_ = 1;
  uint64_t next_grant_id_ = 1;
  uint64_t next_hold_id_ = 1;
  uint64_t next_purge_id_ = 1;
  uint64_t next_work_id_ = 1;
};

}  // namespace kvrt
