#include "services/telemetry/reuse_rejection.hpp"

#include <string>

#include "services/common/assert.hpp"

namespace kvrt {

std::string_view to_string(ReuseBucket b) {
  switch (b) {
    case ReuseBucket::authorization:
      return "authorization";
    case ReuseBucket::index_miss:
      return "index_miss";
    case ReuseBucket::incompatible:
      return "incompatible";
    case ReuseBucket::stale_generation:
      return "stale_generation";
    case ReuseBucket::lease:
      return "lease";
    case ReuseBucket::mapping_lag:
      return "mapping_lag";
    case ReuseBucket::stale_snapshot:
      return "stale_snapshot";
    case ReuseBucket::execution:
      return "execution";
  }
  return "unknown_bucket";
}

std::string_view to_string(RejectionReason r) {
  switch (r) {
    case RejectionReason::unauthenticated:
      return "unauthenticated";
    case RejectionReason::principal_revoked:
      return "principal_revoked";
    case RejectionReason::namespace_denied:
      return "namespace_denied";
    case RejectionReason::namespace_closed:
      return "namespace_closed";
    case RejectionReason::stale_namespace_generation:
      return "stale_namespace_generation";
    case RejectionReason::cross_namespace_key:
      return "cross_namespace_key";
    case RejectionReason::no_candidate:
      return "no_candidate";
    case RejectionReason::semantic_mismatch:
      return "semantic_mismatch";
    case RejectionReason::layout_mismatch:
      return "layout_mismatch";
    case RejectionReason::isolation_mismatch:
      return "isolation_mismatch";
    case RejectionReason::collision_witness_missing:
      return "collision_witness_missing";
    case RejectionReason::collision_witness_mismatch:
      return "collision_witness_mismatch";
    case RejectionReason::module_position_mismatch:
      return "module_position_mismatch";
    case RejectionReason::session_interval_mismatch:
      return "session_interval_mismatch";
    case RejectionReason::stale_candidate_generation:
      return "stale_candidate_generation";
    case RejectionReason::stale_index_version:
      return "stale_index_version";
    case RejectionReason::stale_tree_version:
      return "stale_tree_version";
    case RejectionReason::stale_pool_generation:
      return "stale_pool_generation";
    case RejectionReason::frontier_not_valid:
      return "frontier_not_valid";
    case RejectionReason::lease_unavailable:
      return "lease_unavailable";
    case RejectionReason::lease_incomplete:
      return "lease_incomplete";
    case RejectionReason::mapping_frontier_lag:
      return "mapping_frontier_lag";
    case RejectionReason::stale_snapshot_version:
      return "stale_snapshot_version";
    case RejectionReason::snapshot_evidence_drift:
      return "snapshot_evidence_drift";
    case RejectionReason::execution_failed:
      return "execution_failed";
  }
  return "unknown_reason";
}

ReuseBucket bucket_of(RejectionReason r) {
  switch (r) {
    case RejectionReason::unauthenticated:
    case RejectionReason::principal_revoked:
    case RejectionReason::namespace_denied:
    case RejectionReason::namespace_closed:
    case RejectionReason::stale_namespace_generation:
    case RejectionReason::cross_namespace_key:
      return ReuseBucket::authorization;
    case RejectionReason::no_candidate:
      return ReuseBucket::index_miss;
    case RejectionReason::semantic_mismatch:
    case RejectionReason::layout_mismatch:
    case RejectionReason::isolation_mismatch:
    case RejectionReason::collision_witness_missing:
    case RejectionReason::collision_witness_mismatch:
    case RejectionReason::module_position_mismatch:
    case RejectionReason::session_interval_mismatch:
      return ReuseBucket::incompatible;
    case RejectionReason::stale_candidate_generation:
    case RejectionReason::stale_index_version:
    case RejectionReason::stale_tree_version:
    case RejectionReason::stale_pool_generation:
    case RejectionReason::frontier_not_valid:
      return ReuseBucket::stale_generation;
    case RejectionReason::lease_unavailable:
    case RejectionReason::lease_incomplete:
      return ReuseBucket::lease;
    case RejectionReason::mapping_frontier_lag:
      return ReuseBucket::mapping_lag;
    case RejectionReason::stale_snapshot_version:
    case RejectionReason::snapshot_evidence_drift:
      return ReuseBucket::stale_snapshot;
    case RejectionReason::execution_failed:
      return ReuseBucket::execution;
  }
  KVRT_ASSERT(false, "rejection reason " + std::to_string(static_cast<int>(r)) + " has no bucket");
  return ReuseBucket::execution;
}

bool is_cross_namespace(RejectionReason r) {
  return r == RejectionReason::namespace_denied || r == RejectionReason::cross_namespace_key;
}

bool is_stale_namespace(RejectionReason r) { return r == RejectionReason::stale_namespace_generation; }

bool is_generation_or_version(RejectionReason r) {
  const ReuseBucket b = bucket_of(r);
  return b == ReuseBucket::stale_generation || b == ReuseBucket::stale_snapshot;
}

std::optional<RejectionReason> authorization_rejection(ErrorCode code) {
  switch (code) {
    case ErrorCode::authorization_unauthenticated:
    case ErrorCode::authorization_grant_ended:
      return RejectionReason::unauthenticated;
    case ErrorCode::authorization_principal_revoked:
      return RejectionReason::principal_revoked;
    case ErrorCode::authorization_namespace_denied:
    case ErrorCode::authorization_unknown_namespace:
      return RejectionReason::namespace_denied;
    case ErrorCode::authorization_namespace_closed:
      return RejectionReason::namespace_closed;
    case ErrorCode::authorization_stale_generation:
      return RejectionReason::stale_namespace_generation;
    default:
      return std::nullopt;
  }
}

}  // namespace kvrt
