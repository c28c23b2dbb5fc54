#pragma once
// AllocatorService: the allocator owner as the node serves it. It
// holds the BlockAllocator core and which worker session owns each request
// and lease, applies one batch of wire operations in order (one outcome per
// operation), and ends a session's holdings through the core's normal
// operations. No CAF here: actors/allocator_actor.cpp only decodes, makes
// one call, and encodes.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/session_types.hpp"
#include "services/allocator/allocator_requests.hpp"
#include "services/allocator/block_allocator.hpp"
#include "services/allocator/block_residue.hpp"
#include "services/allocator/capacity_pressure_monitor.hpp"
#include "services/allocator/namespace_quotas.hpp"
#include "services/allocator/node_fault_points.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"
#include "services/reuse/reuse_step_answers.hpp"
#include "services/session/session_holdings.hpp"

namespace kvrt {

// What ending one session released (each item also produced its receipt).
struct SessionReclaim {
  uint32_t requests_released = 0;
  uint32_t leases_released = 0;
  std::vector<AllocatorOutcome> receipts;
  // The fault point after_reclaim_leases stopped it between the session's
  // leases and its requests: the requests are still the session's, and the
  // caller ends the session again later (end_session resumes).
  bool interrupted = false;
};

// What the node's configuration decides about its allocator owner.
struct AllocatorServiceOptions {
  // [node] fault_injection: sessions may arm the core's named fault points.
  bool fault_injection = false;
  // Block quotas per namespace and trust domain (the authorization
  // configuration's quota_blocks). None configured: allocations may leave
  // their namespace unnamed and nothing is tracked.
  BlockQuotaConfig quotas{};
};

class AllocatorService {
 public:
  explicit AllocatorService(BlockAllocator allocator, AllocatorServiceOptions options = {});
  // Not moved: fault_points_ names allocator_'s points by address.
  AllocatorService(const AllocatorService&) = delete;
  AllocatorService& operator=(const AllocatorService&) = delete;

  // The allocator route: one outcome per operation, in order. Refusals for
  // capacity feed the pressure monitor (take_pressure).
  AllocatorBatchReceipt apply(SessionId session, const AllocatorBatch& batch);
  AllocatorOutcome apply_one(SessionId session, const AllocatorOp& op);
  // The fault_arm route (fault-injection runs): refused unless the node runs
  // with [node] fault_injection; otherwise NodeFaultPoints::arm over every
  // owner's points ("allocator.after_reserve_group_0", ...). The receipt
  // lists every point armed afterwards.
  Result<FaultArmReceipt> apply(SessionId session, const FaultArmRequest& request);
  // The node's fault points: the allocator's own are added here; the node
  // adds the other owners' before it serves (actors/node_runtime.cpp).
  NodeFaultPoints& fault_points() { return fault_points_; }

  // ---- node-internal: what the other owners of the node ask --------------
  // The authorization owner granted `session` a namespace: from now on its
  // allocations may be charged to it (AllocateOp.namespace_name).
  void grant(SessionId session, const std::string& namespace_name);
  // The index's publication, phase 1: the request's tables as `session`
  // may read them; nullopt when it holds no such request.
  std::optional<BlockTableView> read_table(SessionId session, RequestId request);
  // The hash chain's publication: attaches each weak identity; answers, per
  // tag, ok or the typed error that refused it.
  std::vector<Status> tag_cache_keys(const std::vector<CacheKeyTag>& tags);
  // The radix index's cached pages: one lease per handle held by the node
  // itself (kNodeSession), or nullopt where the allocator refused it.
  std::vector<std::optional<LeaseId>> lease_for_node(const std::vector<PhysicalBlockHandle>& handles);
  void release_node_leases(const std::vector<LeaseId>& leases);
  // Step 10 of 0x0CD, or attempts that ended without a receipt: one flag per
  // lease, 1 released, 0 not held by the session.
  std::vector<uint8_t> release_leases(SessionId session, const std::vector<LeaseId>& leases);
  // Work kept being refused for capacity with nothing released in between
  // (CapacityPressureMonitor): the blocks per group it lacks, once.
  std::optional<uint32_t> take_pressure() { return std::exchange(pressure_, std::nullopt); }
  // A session ended: its leases, then its requests, go back. Idempotent, so
  // a reclaim that was interrupted (SessionReclaim::interrupted) finishes
  // when it is called again; until then the requests stay the ended
  // session's, where no live session can name them.
  SessionReclaim end_session(SessionId session);
  // The allocator owner's fault points: the core's, then the reclaim's.
  std::vector<std::string> fault_point_names() const;
  static constexpr const char* kReclaimFaultPoint = "after_reclaim_leases";
  // Steps 4-5 of the executable-reuse transaction (0x0CD), node-internal:
  // a lease on every handle for the session, all or none (a refusal releases
  // what this call took and names the first refusal), then, under the
  // leases, the current generation of every pool the handles name and the
  // valid frontier: bundle by bundle, the rows every group's block holds,
  // up to the first bundle that is not full. A malformed request (handles
  // not bundles x groups) is refused like a lease.
  ReuseLeaseAnswer reuse_leases(SessionId session, const ReuseLeaseRequest& request);
  std::vector<AllocatorEvent> drain_events() { return allocator_.drain_events(); }

  // A refusal because a handle names a pool this owner does not hold: on a
  // node with pools per trust domain, a session presenting another domain's
  // handle (counted as foreign_pool_refusals; the actor logs it).
  static bool names_foreign_pool(const Error& e);

  OwnerStats stats() const;
  Status validate() const;
  const BlockAllocator& core() const { return allocator_; }
  // A purge's step 5 with overwrite: every block that may hold rows of the
  // namespace is zeroed before its next owner (BlockResidue); a name the
  // node does not know marks the whole pool. Returns the blocks marked.
  uint64_t mark_for_overwrite(const std::string& namespace_name);

 private:
  AllocatorOutcome apply(SessionId s, const AllocateOp& op);
  AllocatorOutcome apply(SessionId s, const AppendOp& op);
  AllocatorOutcome apply(SessionId s, const CommitRowsOp& op);
  AllocatorOutcome apply(SessionId s, const ForkOp& op);
  AllocatorOutcome apply(SessionId s, const TruncateOp& op);
  AllocatorOutcome apply(SessionId s, const ReleaseOp& op);
  AllocatorOutcome apply(SessionId s, const TouchOp& op);
  AllocatorOutcome apply(SessionId s, const AcquireLeaseOp& op);
  AllocatorOutcome apply(SessionId s, const ReleaseLeaseOp& op);
  AllocatorOutcome apply(SessionId s, const ReadTableOp& op);
  Status check_request(SessionId s, RequestId request, const char* field) const;
  // The namespace an allocation of session `s` is served in: nullopt when
  // the node enforces no quota and the op names none; an error when the op
  // must name one, or names one the session was never granted.
  Result<std::optional<uint32_t>> charged_namespace(SessionId s, const std::string& name) const;
  // The gate of a request's namespace (nullptr when quotas are not enforced).
  std::optional<NamespaceQuotaGate> gate_of(RequestId request) const;
  // A transaction's receipt for the namespace upkeep: a refusal counted
  // against the request's namespace, a committed one's reference changes
  // recorded (quota holdings, block residue).
  void settle(RequestId request, std::optional<uint32_t> ns, const AllocationReceipt& r);
  LeaseReleaseReceipt finish_lease(LeaseId lease);  // forgets a released lease, names its block

  BlockAllocator allocator_;
  AllocatorServiceOptions options_;
  NodeFaultPoints fault_points_;                           // holds allocator_'s points by address
  SessionHoldings<uint64_t> requests_{"request"};          // RequestId value -> session
  SessionHoldings<uint64_t> leases_{"lease"};              // LeaseId value -> session
  std::map<uint64_t, PhysicalBlockHandle> lease_handles_;  // LeaseId value -> leased block
  uint64_t operations_ = 0;
  uint64_t errors_ = 0;
  uint64_t out_of_capacity_ = 0;
  uint64_t locked_eviction_rejects_ = 0;  // out_of_capacity_ while the node's cache held leases
  uint64_t quota_exceeded_ = 0;
  uint64_t foreign_pool_refusals_ = 0;     // handles naming a pool of no pool set here
  uint64_t partial_tails_copied_ = 0;      // allocations whose copy-rows intent ran (0x07D)
  uint64_t partial_tail_rows_copied_ = 0;  // [rows], each spanning every cache group
  NamespaceQuotas quotas_;
  BlockResidue residue_;  // which namespaces' rows each block may hold: what a purge marks
  std::map<uint64_t, std::set<std::string, std::less<>>> granted_;  // SessionId value -> namespaces granted
  uint64_t sessions_ended_ = 0;
  std::set<uint64_t> reclaims_interrupted_;  // ended sessions whose requests are still to release
  uint64_t reclaim_resumptions_ = 0;
  uint64_t requests_reclaimed_ = 0;
  HitFunnelCounters hits_;  // the node's reuse funnel, how presented candidates end (0x0CF)
  uint64_t leases_reclaimed_ = 0;
  CapacityPressureMonitor pressure_monitor_;
  std::optional<uint32_t> pressure_;
};

}  // namespace kvrt
