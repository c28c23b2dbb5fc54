#include "services/common/error.hpp"

namespace kvrt {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok:
      return "ok";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::config_parse:
      return "config_parse";
    case ErrorCode::config_field:
      return "config_field";
    case ErrorCode::io:
      return "io";
    case ErrorCode::invalid_manifest:
      return "invalid_manifest";
    case ErrorCode::incompatible:
      return "incompatible";
    case ErrorCode::stale_generation:
      return "stale_generation";
    case ErrorCode::request_not_visible:
      return "request_not_visible";
    case ErrorCode::table_out_of_bounds:
      return "table_out_of_bounds";
    case ErrorCode::unknown_physical:
      return "unknown_physical";
    case ErrorCode::stale_physical:
      return "stale_physical";
    case ErrorCode::row_not_valid:
      return "row_not_valid";
    case ErrorCode::coordinate_out_of_range:
      return "coordinate_out_of_range";
    case ErrorCode::layer_gap:
      return "layer_gap";
    case ErrorCode::duplicate_axis:
      return "duplicate_axis";
    case ErrorCode::table_length_drift:
      return "table_length_drift";
    case ErrorCode::overlapping_tensors:
      return "overlapping_tensors";
    case ErrorCode::stale_table_version:
      return "stale_table_version";
    case ErrorCode::kernel_block_not_divisor:
      return "kernel_block_not_divisor";
    case ErrorCode::unknown_request:
      return "unknown_request";
    case ErrorCode::unknown_group:
      return "unknown_group";
    case ErrorCode::address_out_of_tensor:
      return "address_out_of_tensor";
    case ErrorCode::slot_reuse:
      return "slot_reuse";
    case ErrorCode::bundle_mismatch:
      return "bundle_mismatch";
    case ErrorCode::decode_failed:
      return "decode_failed";
    case ErrorCode::message_too_large:
      return "message_too_large";
    case ErrorCode::unknown_enum:
      return "unknown_enum";
    case ErrorCode::invariant_violated:
      return "invariant_violated";
    case ErrorCode::fault_injected:
      return "fault_injected";
    case ErrorCode::not_owner:
      return "not_owner";
    case ErrorCode::node_unreachable:
      return "node_unreachable";
    case ErrorCode::rpc_timeout:
      return "rpc_timeout";
    case ErrorCode::rpc_failed:
      return "rpc_failed";
    case ErrorCode::session_ended:
      return "session_ended";
    case ErrorCode::descriptor_invalid:
      return "descriptor_invalid";
    case ErrorCode::authorization_route_denied:
      return "authorization_route_denied";
    case ErrorCode::node_lost:
      return "node_lost";
    case ErrorCode::descriptor_in_use:
      return "descriptor_in_use";
    case ErrorCode::ledger_identity_broken:
      return "ledger_identity_broken";
    case ErrorCode::storage_exhausted:
      return "storage_exhausted";
    case ErrorCode::segment_in_use:
      return "segment_in_use";
    case ErrorCode::unknown_node:
      return "unknown_node";
    case ErrorCode::locked_node_eviction:
      return "locked_node_eviction";
    case ErrorCode::internal_node_eviction:
      return "internal_node_eviction";
    case ErrorCode::lock_underflow:
      return "lock_underflow";
    case ErrorCode::owned_slot_reuse:
      return "owned_slot_reuse";
    case ErrorCode::stale_tree_version:
      return "stale_tree_version";
    case ErrorCode::path_slot_mismatch:
      return "path_slot_mismatch";
    case ErrorCode::receipt_tampered:
      return "receipt_tampered";
    case ErrorCode::unknown_lease:
      return "unknown_lease";
    case ErrorCode::page_misaligned:
      return "page_misaligned";
    case ErrorCode::digest_collision:
      return "digest_collision";
    case ErrorCode::page_not_mapped:
      return "page_not_mapped";
    case ErrorCode::half_mapped_frontier:
      return "half_mapped_frontier";
    case ErrorCode::stale_slot_generation:
      return "stale_slot_generation";
    case ErrorCode::rows_not_valid:
      return "rows_not_valid";
    case ErrorCode::slots_exhausted:
      return "slots_exhausted";
    case ErrorCode::mapper_shut_down:
      return "mapper_shut_down";
    case ErrorCode::os_mapping_failed:
      return "os_mapping_failed";
    case ErrorCode::pool_fd_missing:
      return "pool_fd_missing";
    case ErrorCode::pool_message_truncated:
      return "pool_message_truncated";
    case ErrorCode::pool_message_bad_magic:
      return "pool_message_bad_magic";
    case ErrorCode::pool_size_mismatch:
      return "pool_size_mismatch";
    case ErrorCode::executor_stale_snapshot:
      return "executor_stale_snapshot";
    case ErrorCode::executor_coverage_overlap:
      return "executor_coverage_overlap";
    case ErrorCode::executor_coverage_gap:
      return "executor_coverage_gap";
    case ErrorCode::executor_head_mapping:
      return "executor_head_mapping";
    case ErrorCode::executor_frontier_mismatch:
      return "executor_frontier_mismatch";
    case ErrorCode::executor_shape_mismatch:
      return "executor_shape_mismatch";
    case ErrorCode::executor_unsupported_dtype:
      return "executor_unsupported_dtype";
    case ErrorCode::executor_view_out_of_bounds:
      return "executor_view_out_of_bounds";
    case ErrorCode::authorization_unauthenticated:
      return "authorization_unauthenticated";
    case ErrorCode::authorization_principal_revoked:
      return "authorization_principal_revoked";
    case ErrorCode::authorization_namespace_denied:
      return "authorization_namespace_denied";
    case ErrorCode::authorization_unknown_namespace:
      return "authorization_unknown_namespace";
    case ErrorCode::authorization_stale_generation:
      return "authorization_stale_generation";
    case ErrorCode::authorization_grant_ended:
      return "authorization_grant_ended";
    case ErrorCode::authorization_namespace_closed:
      return "authorization_namespace_closed";
    case ErrorCode::authorization_purge_pending:
      return "authorization_purge_pending";
    case ErrorCode::authorization_unknown_hold:
      return "authorization_unknown_hold";
    case ErrorCode::reuse_step_out_of_order:
      return "reuse_step_out_of_order";
    case ErrorCode::reuse_attempt_closed:
      return "reuse_attempt_closed";
    case ErrorCode::reuse_receipt_revoked:
      return "reuse_receipt_revoked";
    case ErrorCode::reuse_evidence_mismatch:
      return "reuse_evidence_mismatch";
    case ErrorCode::telemetry_forbidden_label:
      return "telemetry_forbidden_label";
    case ErrorCode::telemetry_counter_regression:
      return "telemetry_counter_regression";
    case ErrorCode::run_stalled:
      return "run_stalled";
    case ErrorCode::run_worker_failed:
      return "run_worker_failed";
    case ErrorCode::run_interrupted:
      return "run_interrupted";
  }
  return "unknown_error_code";
}

std::string Error::describe() const {
  std::string out{to_string(code)};
  out += ": ";
  out += reason;
  if (!field.empty()) {
    out += " [";
    out += field;
    out += "]";
  }
  return out;
}

Error make_error(ErrorCode code, std::string reason, std::string field) {
  return Error{code, std::move(reason), std::move(field)};
}

}  // namespace kvrt
