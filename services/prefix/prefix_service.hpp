#pragma once
// PrefixService: the prefix-index owner as the node serves it.
//
// Isolation (0x0CE) uses three different controls, each for what it is for:
//   - authorization: a session's lookup or publication reaches the index only
//     for a namespace the authorization owner granted that session, at the
//     namespace's current generation (checked here, before any hash is
//     computed or probed: "Authorization Before Lookup");
//   - salt: the chain's first block hashes the namespace's salt and
//     generation (vLLM's cache_salt), so tenants never share a digest and a
//     revoked generation's entries can never match again;
//   - witness: the collision witness of the index (0x07F) stays on.
//
// Publication is two-phase across owners: the index reads the request's
// table from the allocator owner (BlockTableView), decides the entries, and
// the allocator owner applies the weak-identity tags; a tag the allocator
// refuses is withdrawn from the index (confirm_tags), so the index never
// names an identity the allocator does not hold.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/authorization_types.hpp"
#include "schema/prefix_types.hpp"
#include "schema/session_types.hpp"
#include "services/authorization/namespace_grants.hpp"
#include "services/common/fault_points.hpp"
#include "services/prefix/prefix_index.hpp"
#include "services/prefix/publication_target.hpp"
#include "services/reuse/reuse_candidates.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt {

// A publication waiting for the allocator owner's table.
struct PendingPublication {
  SessionId session;
  PrefixPublishOp op;
};

// The decided publication: the receipt and the tags the allocator must apply.
struct DecidedPublication {
  PrefixPublishReceipt receipt;
  std::vector<CacheKeyTag> tags;
};
// What the allocator must do for it (PrefixBatchRun): apply the tags.
inline std::optional<TagApply> allocator_request(const DecidedPublication& p) {
  if (p.tags.empty()) return std::nullopt;
  return TagApply{p.tags};
}

class PrefixService {
 public:
  static Result<PrefixService> create(PrefixIndexConfig config);

  void grant(SessionId session, SessionNamespaceGrant grant);
  // A namespace moved to a new generation: every grant of an older one is
  // refused as stale, and candidates found before are stale at step 5. The
  // chain holds no blocks: the old generation's tags stay on free blocks
  // until the allocator recycles them (no key reaches them), so there is
  // nothing to release (always empty; the radix owner's returns leases).
  std::vector<LeaseId> advance_generation(const std::string& namespace_name, NamespaceGeneration generation);
  // The hash chain holds no pages: an advance evicts none.
  uint64_t invalidated_pages() const { return 0; }
  void end_session(SessionId session);

  Result<PrefixMatchReceipt> match(SessionId session, const PrefixMatchOp& op);
  // The same lookup without side effects (PrefixPeekOp): the receipt match()
  // would answer now, counted only as a peek.
  Result<PrefixMatchReceipt> peek(SessionId session, const PrefixMatchOp& op);
  // The scheduler handoff of 0x08G is the radix owner's: a hash chain has
  // no path to lock or tree version to freeze. Both answer invalid_argument
  // (field "handoff") and change nothing.
  Result<RadixSchedulerHandoffReceipt> handoff(SessionId session, const PrefixHandoffOp& op);
  Result<HandoffDispositionReceipt> dispose_handoff(SessionId session, const PrefixHandoffDispositionOp& op);
  // Phase 1: authorization and argument checks; ok means "read the table".
  Status check_publication(SessionId session, const PrefixPublishOp& op) const;
  // Phase 2: decide the entries against the allocator's table view.
  Result<DecidedPublication> decide_publication(SessionId session, const PrefixPublishOp& op,
                                                const BlockTableView& table);
  // Phase 3: withdraws the entries whose tags the allocator refused, and
  // counts them out of the receipt. The hash chain holds no lease: nothing
  // to release.
  std::vector<LeaseId> confirm_publication(DecidedPublication& publication, const PublicationAnswer& answer);
  uint32_t confirm_tags(const std::vector<CacheKeyTag>& tags, const std::vector<Status>& results);
  AbsorbOutcome absorb(std::span<const AllocatorEvent> events);

  // Step 3 of the executable-reuse transaction (0x0CD): match() as a
  // candidate. A hit names the d_sem / d_layout recorded when its namespace
  // generation was published, the index version it read, the covered
  // interval [0, S_runtime) and every handle bundle-major. pool_generations
  // are left to the caller, which knows the node's pools. The witness is the
  // covered tokens' digest, which the index compared token by token during
  // the lookup when its collision witness is on (0x07F); without it, none.
  // Errors: match()'s.
  Result<CandidateAnswer> reuse_candidate(SessionId session, const PrefixMatchOp& op);
  // Step 5: the index version as it stands now. It counts retractions
  // (entries dropped by eviction, withdrawn tags, a namespace generation
  // advanced), not insertions: a publication cannot invalidate a candidate
  // found earlier, a retraction can.
  ReuseIndexVersion reuse_version() const {
    return ReuseIndexVersion{retraction_version_, TreeVersion{0}, index_.publication_generation()};
  }
  // Steps 4 and 10 for paths: hash-chain candidates name no path, so there
  // is nothing to lock and no path lease to release.
  ReusePathLeaseAnswer lease_path(SessionId, const ReusePathLeaseRequest&) const {
    return ReusePathLeaseAnswer{std::nullopt, "the hash-chain index holds no paths"};
  }
  bool release_path(SessionId, LeaseId) const { return false; }
  // The hash chain holds no block (the allocator's own LRU evicts cached
  // blocks on demand): work stuck for capacity asks nothing of it.
  std::vector<LeaseId> relieve_pressure(uint32_t) const { return {}; }

  OwnerStats stats() const;
  Status validate() const { return index_.validate(nullptr); }
  const PrefixIndex& index() const { return index_; }

  // A publication's fault points (PrefixBatchRun::fault_point_names), named
  // "prefix.<point>" on the node. The allocator keeps a tag it applied, so a
  // publication is withdrawn only before the tags are sent.
  static constexpr const char* kFaultOwner = "prefix";
  static constexpr bool kAllocationWithdrawable = false;
  FaultPoints& faults() { return faults_; }

 private:
  explicit PrefixService(PrefixIndex index, PrefixScope scope) : index_(std::move(index)), scope_(std::move(scope)) {}
  // The grant checked first (for a publication, against the generation its
  // rows were computed under; none for a lookup), then the identity extras.
  Result<BlockExtrasPlan> authorized_plan(SessionId session, const std::string& namespace_name,
                                          const RequestIdentity& identity,
                                          NamespaceGeneration computed_under = {}) const;
  // The tail block of a publication with tail_rows, against the table:
  // mapped in every group, its rows committed. Errors before anything is
  // recorded.
  Status check_tail_block(const PrefixPublishOp& op, const BlockTableView& table) const;
  // The lookup of an authorized op and its receipt, digest included.
  Result<PrefixMatchReceipt> receipt_for(SessionId session, const PrefixMatchOp& op, const BlockExtrasPlan& plan) const;
  // check_publication's checks; the authorized plan when they pass.
  Result<BlockExtrasPlan> publication_plan(SessionId session, const PrefixPublishOp& op) const;

  PrefixIndex index_;
  PrefixScope scope_;  // the node's local scope; namespaces separate by salt
  NamespaceGrants grants_;
  uint64_t lookups_ = 0, lookup_hit_tokens_ = 0, lookup_prompt_tokens_ = 0;
  uint64_t peeks_ = 0;
  uint64_t unauthorized_ = 0, stale_generation_ = 0;
  LookupFunnelCounters funnel_;  // the node's reuse funnel, lookup stages (0x0CF)
  uint64_t publications_ = 0, tags_refused_ = 0;
  uint64_t tails_published_ = 0, tails_refused_ = 0;  // partial-tail publications (0x07D)
  uint64_t partial_hits_ = 0;                         // lookups whose hit ends inside a block
  uint64_t retraction_version_ = 0;
  PublishedReuseDigests published_digests_;
  FaultPoints faults_;
};

}  // namespace kvrt
