#pragma once
// Rejection buckets of the reuse funnel (spec 0x0CF) and the finer reasons
// the executable-reuse transaction (0x0CD) reports. Every reason belongs to
// exactly one bucket; every bucket is one difference of the monotone funnel
//
//   N_req >= N_auth >= N_cand >= N_compat >= N_gen >= N_lease >= N_map >= N_snap >= N_exec
//
// so bucket b counts the attempts that reached funnel stage b but not b+1.
// Reasons are stable low-cardinality identifiers: they are metric labels.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "services/common/error.hpp"

namespace kvrt {

enum class ReuseBucket : uint8_t {
  authorization = 0,     // N_req - N_auth
  index_miss = 1,        // N_auth - N_cand
  incompatible = 2,      // N_cand - N_compat: semantic / layout / isolation / position rejection
  stale_generation = 3,  // N_compat - N_gen: a generation or version is not current
  lease = 4,             // N_gen - N_lease
  mapping_lag = 5,       // N_lease - N_map: L_map > 0
  stale_snapshot = 6,    // N_map - N_snap
  execution = 7,         // N_snap - N_exec
};
inline constexpr size_t kReuseBucketCount = 8;
std::string_view to_string(ReuseBucket b);

enum class RejectionReason : uint8_t {
  // authorization (0x0CE "Authorization Before Lookup")
  unauthenticated = 0,  // token or principal unknown, or grant ended
  principal_revoked = 1,
  namespace_denied = 2,            // the principal may not use the namespace (cross-namespace)
  namespace_closed = 3,            // a purge stopped admitting the generation (0x0CE step 1)
  stale_namespace_generation = 4,  // grant or key names a generation that is no longer current
  cross_namespace_key = 5,         // the key was built for another namespace or salt than authorized
  // index_miss
  no_candidate = 6,
  // incompatible (0x01A equality-bearing facts, 0x07F witness, 0x0CB, 0x0CC)
  semantic_mismatch = 7,
  layout_mismatch = 8,
  isolation_mismatch = 9,  // the candidate belongs to another namespace
  collision_witness_missing = 10,
  collision_witness_mismatch = 11,
  module_position_mismatch = 12,   // declared module tokens, positions or schema differ
  session_interval_mismatch = 13,  // session history interval, tokens or contract differ
  // stale_generation (0x0CD step 5, and the candidate's namespace generation)
  stale_candidate_generation = 14,
  stale_index_version = 15,
  stale_tree_version = 16,
  stale_pool_generation = 17,
  frontier_not_valid = 18,  // a block's valid rows do not cover the reused interval
  // lease
  lease_unavailable = 19,
  lease_incomplete = 20,  // the leases do not cover every path node and handle
  // mapping_lag
  mapping_frontier_lag = 21,
  // stale_snapshot
  stale_snapshot_version = 22,
  snapshot_evidence_drift = 23,  // the frozen snapshot binds other handles, interval or kernel ABI
  // execution
  execution_failed = 24,
};
inline constexpr size_t kRejectionReasonCount = 25;
std::string_view to_string(RejectionReason r);

ReuseBucket bucket_of(RejectionReason r);

// The authorization reason of 0x0CE for an error an authorization check
// answered (the namespace owner's, or an index owner's grant check);
// nullopt for errors that are not authorization refusals (malformed
// requests are not reuse attempts).
std::optional<RejectionReason> authorization_rejection(ErrorCode code);

// Alert families of 0x0CF ("security boundary pressure", "stale receipt race").
bool is_cross_namespace(RejectionReason r);        // namespace_denied, cross_namespace_key
bool is_stale_namespace(RejectionReason r);        // stale_namespace_generation
bool is_generation_or_version(RejectionReason r);  // every stale_generation or stale_snapshot reason

}  // namespace kvrt
