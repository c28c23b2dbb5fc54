#pragma once
// The node's own view of the reuse funnel of 0x0CF, read live from a running
// node (`kvrt stats`), beside the funnel each engine keeps of its own
// admissions.
//
// Every prefix lookup a worker sends is one reuse attempt.
//   - The prefix owner that answers it (hash chain or radix) sees the first
//     stages: authorized or refused (0x0CE, before the index is touched), and
//     whether the index had a candidate (LookupFunnelCounters).
//   - The allocator owner sees how a candidate ends when an allocation
//     presents its handles (HitFunnelCounters): taken by reference (the
//     blocks are leased to the new request), refused by the generation fence
//     or the valid frontier (not current, 0x0CD step 5), or not taken because
//     the pool had no room for the rest of the prompt, or because the
//     request's namespace or trust domain was at its block quota (its own
//     bucket: the hit was good, the tenant's budget was spent).
//   - The node sees nothing after the lease on the CPU path: mapping, snapshot
//     and execution happen in the worker.
//
// node_reuse_funnel() joins the two owners' counters from the stats a node
// reports. Candidates no allocation has presented yet are "unsettled": the
// attempt is in flight, or its engine dropped the hit.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "schema/session_types.hpp"
#include "services/common/error.hpp"
#include "services/telemetry/reuse_rejection.hpp"

namespace kvrt {

// The reuse reason for an allocation refused over its prefix-hit handles;
// nullopt for other refusals (a malformed bundle list is not a reuse outcome).
std::optional<RejectionReason> hit_rejection(ErrorCode code);

class LookupFunnelCounters {
 public:
  void record_refused(RejectionReason reason) {
    ++requests_;
    ++refused_[static_cast<size_t>(reason)];
  }
  void record_lookup(uint32_t hit_tokens) {
    ++requests_;
    ++(hit_tokens > 0 ? candidates_ : misses_);
  }
  // Adds reuse_requests, reuse_candidates, reuse_misses and one
  // reuse_refused_<reason> per authorization reason to `out`.
  void put(OwnerStats& out) const;

 private:
  uint64_t requests_ = 0, candidates_ = 0, misses_ = 0;
  std::array<uint64_t, kRejectionReasonCount> refused_{};
};

class HitFunnelCounters {
 public:
  void record_leased() { ++leased_; }
  void record_out_of_capacity() { ++out_of_capacity_; }
  void record_quota_exceeded() { ++quota_exceeded_; }
  void record_refused(RejectionReason reason) { ++refused_[static_cast<size_t>(reason)]; }
  // Adds reuse_leased, reuse_out_of_capacity, reuse_quota_exceeded and one
  // reuse_refused_<reason> per not-current reason to `out`.
  void put(OwnerStats& out) const;

 private:
  uint64_t leased_ = 0, out_of_capacity_ = 0, quota_exceeded_ = 0;
  std::array<uint64_t, kRejectionReasonCount> refused_{};
};

struct NodeReuseFunnel {
  uint64_t requests = 0;         // N_req: lookups received
  uint64_t authorized = 0;       // N_auth
  uint64_t candidates = 0;       // N_cand: authorized lookups the index had a candidate for
  uint64_t current = 0;          // N_gen: candidates not refused as stale (unsettled ones included)
  uint64_t leased = 0;           // N_lease: candidates an allocation took by reference
  uint64_t out_of_capacity = 0;  // candidates presented to an allocation that found no room
  uint64_t quota_exceeded = 0;   // candidates presented to an allocation refused for its block quota
  uint64_t unsettled = 0;        // candidates no allocation presented (yet)
  std::array<uint64_t, kRejectionReasonCount> rejections{};  // by reason, over every rejected attempt

  // N_compat: the candidates less those refused as incompatible.
  uint64_t compatible() const;
};

// From the "prefix_index", "allocator" and "node" owners' stats (the node's
// carry the reuse transaction's refusals before any lookup); an owner
// missing from `owners` contributes nothing.
NodeReuseFunnel node_reuse_funnel(const std::vector<OwnerStats>& owners);

}  // namespace kvrt
