#pragma once
// RadixBlockService: the radix index owner as the node serves it (spec 0x08
// over the node's session protocol). The node runs
// either this owner or the hash-chain PrefixService behind the same messages
// (PrefixBatch match and publish ops, PrefixMatchReceipt), selected by
// `[node] prefix_index`; engines do not change.
//
//   match    authorization first (NamespaceGrants, 0x0CE), then the longest
//            cached page-aligned prefix in the namespace's subtree (the
//            namespace, its salt and generation form the tree's extra key, so
//            tenants never share a path and a revoked generation never
//            matches again), capped so the last prompt token is recomputed
//            when logits are required (0x07A).
//   publish  three phases across owners, like the hash chain's: read the
//            request's table from the allocator owner, adopt its full pages
//            into the tree (decide_publication), have the allocator grant one
//            lease per block of each adopted page, then confirm(): record the
//            leases or withdraw the adoption, and evict leaves over the
//            budget. confirm() returns every lease the allocator must release.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/prefix_types.hpp"
#include "schema/session_types.hpp"
#include "services/allocator/allocator_requests.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/authorization/namespace_grants.hpp"
#include "services/common/fault_points.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/prefix/hash_chain.hpp"
#include "services/prefix/kv_events.hpp"
#include "services/prefix/prefix_lengths.hpp"
#include "services/radix/radix_block_index.hpp"
#include "services/reuse/reuse_candidates.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt {

// A publication waiting for the allocator's leases.
struct RadixPublication {
  PrefixPublishReceipt receipt;  // published counted at confirm()
  RadixAdoption adoption;
  std::vector<PhysicalBlockHandle> lease_handles;  // adoption.pages x groups, page-major
  // With an event sink: what BlockStored announces once the leases hold.
  std::optional<KvBlockStored> stored;
};
// What the allocator must do for it (PrefixBatchRun): lease the pages' blocks to the node.
inline std::optional<NodeLeaseAcquire> allocator_request(const RadixPublication& p) {
  if (p.lease_handles.empty()) return std::nullopt;
  return NodeLeaseAcquire{p.lease_handles};
}

class RadixBlockService {
 public:
  // budget_blocks: blocks per cache group the tree may hold leased [blocks].
  // policy: full blocks (page-aligned hits), or immutable partial tails
  // (0x07D: the tree runs token by token, a finished request may publish its
  // partly filled last page, and a hit may end inside a page; see
  // RadixBlockIndexConfig::partial_tails).
  static Result<RadixBlockService> create(const CacheLayoutManifest& layout, uint32_t budget_blocks,
                                          EvictionPolicy eviction = EvictionPolicy::lru,
                                          ReusePolicy policy = ReusePolicy::full_block);

  void grant(SessionId session, SessionNamespaceGrant grant) { grants_.grant(session, std::move(grant)); }
  // A namespace moved to generation g (an invalidation, 0x01A): older grants
  // are refused as stale, and the pages published under an older generation,
  // which no key can reach again, leave the tree now instead of waiting for
  // the budget (locked paths when their locks end). Returns their leases to
  // release.
  std::vector<LeaseId> advance_generation(const std::string& name, NamespaceGeneration g);
  // Pages advance_generation evicted, since the node started.
  uint64_t invalidated_pages() const { return invalidated_pages_; }
  // Ends the session's grants and releases the path leases it still holds.
  void end_session(SessionId session);

  Result<PrefixMatchReceipt> match(SessionId session, const PrefixMatchOp& op);
  // The same lookup without side effects (PrefixPeekOp): the receipt match()
  // would answer now, with no stamp, split or hit count in the tree, counted
  // only as a peek.
  Result<PrefixMatchReceipt> peek(SessionId session, const PrefixMatchOp& op);

  // The executable-reuse transaction (0x0CD) for radix candidates.
  // Step 3: match() as a candidate naming its path root -> terminal, the
  // tree's retraction version (RadixBlockIndex), the producer's digests recorded at publication, and the
  // covered tokens' digest (the tree compares every token on its walk, so a
  // hit's stored tokens equal the request's). pool_generations are the
  // caller's. Errors: match()'s.
  Result<CandidateAnswer> reuse_candidate(SessionId session, const PrefixMatchOp& op);
  // Step 4: a lock reference on the path for the session (0x08D), refused
  // when the terminal left the tree or a node of `path` is no longer on its
  // path (a split since the lookup may add nodes; the lock covers them too).
  ReusePathLeaseAnswer lease_path(SessionId session, const ReusePathLeaseRequest& request);
  // Step 10, or a rejected attempt: false for a lease the session does not
  // hold from lease_path (a handoff's lock ends by its disposition).
  bool release_path(SessionId session, LeaseId lease);

  // The scheduler handoff of 0x08G (PrefixHandoffOp): authorization first,
  // then the match (with its stamps and split), frozen into a receipt with
  // the path root -> terminal, v_tree, the suffix still to compute and the
  // 0x08G estimates; a hit's path is locked (0x08D) under a lease the
  // session holds until it disposes of the handoff or ends. A miss locks
  // nothing (lease 0, lock_required false). Errors: match()'s.
  Result<RadixSchedulerHandoffReceipt> handoff(SessionId session, const PrefixHandoffOp& op);
  // The scheduler's disposition. Both check, in order: the receipt's own
  // digests (receipt_tampered), that its lease is a handoff lease of this
  // session for this request (unknown_lease; an admitted lease may still be
  // released), and that it is the receipt that lease was issued with
  // (receipt_tampered: edited and digested again). Then admit checks that
  // v_tree has not moved since (stale_tree_version: the scheduler releases
  // and asks again) and that the lease's path still ends at the receipt's
  // terminal through its nodes (path_slot_mismatch), and retains the lock
  // for the admitted request; release ends the lock, stale or not. A
  // refusal changes nothing. A miss's receipt is checked for its digests
  // only and answered with no lease.
  Result<HandoffDispositionReceipt> dispose_handoff(SessionId session, const PrefixHandoffDispositionOp& op);
  // Step 5: the tree's retraction version now.
  ReuseIndexVersion reuse_version() const { return ReuseIndexVersion{0, index_.retraction_version(), publications_}; }
  // Phase 1: authorization and argument checks; ok means "read the table".
  Status check_publication(SessionId session, const PrefixPublishOp& op) const;
  // Phase 2: adopt pages [0, end_block) of the table. Errors: those of
  // check_publication, row_not_valid for a page that is not full, and
  // invalid_argument for a table shorter than end_block.
  Result<RadixPublication> decide_publication(SessionId session, const PrefixPublishOp& op,
                                              const BlockTableView& table);
  // Phase 3: answer.leases[i] answers lease_handles[i] (nullopt: refused).
  // Fills the receipt's published count; returns the leases to release (a
  // withdrawn adoption's, and the pages the budget evicted).
  std::vector<LeaseId> confirm_publication(RadixPublication& publication, const PublicationAnswer& answer);

  // Requests are stuck for about `missing_blocks` blocks per group that the
  // cache holds (the allocator saw refusals pile up with no release): evict
  // that many pages, policy order, leaf first (0x08E), and return their
  // leases to release.
  std::vector<LeaseId> relieve_pressure(uint32_t missing_blocks);
  // The allocator never evicts a block the tree leases, so its eviction
  // events name nothing the tree holds.
  void absorb(std::span<const AllocatorEvent>) {}

  // KV events (services/prefix/kv_events.hpp) of the pages the tree holds:
  // BlockStored when an adoption's leases hold, BlockRemoved when its pages
  // leave (eviction, invalidation, pressure), one event per cache group. A
  // page's key is its path's hash chain (ChainHasher over the path's pages,
  // rooted at the subtree's key: namespace, salt, generation, identity), so
  // equal keys mean equal paths, as in the hash-chain index. nullptr: none.
  void set_event_sink(KvEventSink* sink);

  OwnerStats stats() const;
  // The index's laws, then: every path lease's terminal is in the tree and
  // carries at least as many lock references as leases end at it.
  Status validate() const;
  const RadixBlockIndex& index() const { return index_; }

  // A publication's fault points (PrefixBatchRun::fault_point_names), named
  // "radix.<point>" on the node: before the decision, after the adoption
  // (the adoption is taken back node for node: RadixTree::undo_insert) and
  // after the allocator leased the adopted pages (the leases go back too).
  // tests/services/prefix_fault_twin_test.cpp shows matches, nodes, clock
  // and eviction order equal to a tree that never adopted. On a live node
  // another session's walk may come between the decision and the
  // allocator's answer; the tree is then not the same as before, and only
  // the adoption's leaf leaves it (its split and stamps stay).
  static constexpr const char* kFaultOwner = "radix";
  static constexpr bool kAllocationWithdrawable = true;
  FaultPoints& faults() { return faults_; }
  // Besides the publication's points, faults() arms kRadixEvictFaultPoint
  // ("radix.evict"), reached before each victim of a budget or pressure
  // eviction (RadixEvictionSink::interrupted): the eviction ends there, the
  // pages evicted so far are gone and their leases returned, and the
  // candidates left keep their order (tests/services/prefix_fault_twin_test.cpp:
  // a twin that evicted exactly those pages makes the same choices). An
  // invalidation's eviction of a generation has no point: it is one pass
  // that the next advance repeats anyway.

 private:
  RadixBlockService(RadixBlockIndex index, Sha256Digest layout_sha256, uint32_t groups, uint64_t row_bytes,
                    ChainHasher hasher)
      : index_(std::move(index)),
        layout_sha256_(layout_sha256),
        groups_(groups),
        row_bytes_(row_bytes),
        hasher_(std::move(hasher)) {}
  // The BlockStored of an adoption: the chain over the whole path, the
  // adopted pages' hashes (they follow the pages the tree held).
  KvBlockStored stored_event(uint64_t key, std::span<const TokenId> path, const RadixAdoption& adoption,
                             const std::string& adapter) const;
  // BlockRemoved for the announced pages that left the tree since the last call.
  void emit_removals();
  // The grant checked first (for a publication, against the generation its
  // rows were computed under; none for a lookup), then the identity extras.
  Result<uint64_t> namespace_key(SessionId session, const std::string& namespace_name, const RequestIdentity& identity,
                                 NamespaceGeneration computed_under = {}) const;
  // match() and the node its hit ends at.
  Result<PrefixMatchReceipt> match_at(SessionId session, const PrefixMatchOp& op, RadixNodeRef* terminal);
  // The receipt of a lookup of `op` that found `m` (a match or a peek).
  PrefixMatchReceipt receipt_for(SessionId session, const PrefixMatchOp& op, uint32_t cap,
                                 const RadixBlockMatch& m) const;
  // With logits required the last prompt token is always computed (0x07A).
  static uint32_t reuse_cap(const PrefixMatchOp& op);

  RadixBlockIndex index_;
  Sha256Digest layout_sha256_;
  uint32_t groups_ = 0;
  uint64_t row_bytes_ = 0;  // B_row over every cache group, for the 0x08G estimates [bytes / token]
  NamespaceGrants grants_;
  uint64_t lookups_ = 0, lookup_prompt_tokens_ = 0, lookup_hit_tokens_ = 0, unauthorized_ = 0;
  uint64_t peeks_ = 0;
  LookupFunnelCounters funnel_;  // the node's reuse funnel, lookup stages (0x0CF)
  uint64_t publications_ = 0, pages_adopted_ = 0, pages_duplicate_ = 0, adoptions_withdrawn_ = 0;
  uint64_t pressure_calls_ = 0, pressure_pages_ = 0;
  // Who holds a path's lock reference: a reuse attempt (step 4), a handoff
  // awaiting the scheduler's disposition, or a request the scheduler admitted.
  enum class PathLeaseKind : uint8_t { reuse, handoff, admitted };
  struct PathLease {
    SessionId session;
    RadixNodeRef terminal;
    PathLeaseKind kind = PathLeaseKind::reuse;
    RequestId request{};    // handoff and admitted only
    Sha256Digest issued{};  // handoff and admitted: the receipt's digest
  };
  // A lock reference on `terminal`'s path for `session`; the tree's error when it refuses it.
  Result<LeaseId> lock_for(SessionId session, RadixNodeRef terminal, PathLeaseKind kind, RequestId request = {});
  std::map<uint64_t, PathLease> path_leases_;  // LeaseId value -> lease
  uint64_t next_path_lease_ = 1;
  uint64_t path_leases_granted_ = 0, path_leases_refused_ = 0;
  uint64_t handoffs_ = 0, handoffs_admitted_ = 0, handoffs_released_ = 0, handoffs_stale_ = 0, handoffs_refused_ = 0;
  PublishedReuseDigests published_digests_;
  // The subtree keys publications used, by namespace and generation: what
  // advance_generation evicts.
  std::map<std::string, std::map<uint64_t, std::set<uint64_t>>> published_keys_;
  uint64_t invalidated_pages_ = 0;
  uint64_t tails_published_ = 0;  // adoptions whose partial last page the tree took (0x07D)
  uint64_t partial_hits_ = 0;     // lookups whose hit ends inside a page
  FaultPoints faults_;
  ChainHasher hasher_;
  KvEventSink* events_ = nullptr;
  std::unordered_map<uint32_t, BlockHash> announced_;  // cached page id -> its key in the events
};

}  // namespace kvrt
