#pragma once
// Typed caller errors (docs/conventions.md habit 4): a caller's broken precondition is a
// value, never an exception or a crash. Running out of capacity is a normal
// outcome and is reported by the owner's own result type, not here; a bug in
// kvrt itself is a KVRT_ASSERT.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvrt {

// Stable numeric values: they travel in schema/kvrt.capnp (TypedError.code), so
// a value is never renumbered; new codes are appended inside their family.
enum class ErrorCode : uint16_t {
  ok = 0,

  // Input and configuration (1xx).
  invalid_argument = 100,
  config_parse = 101,  // a TOML file is malformed (file:line:column in reason)
  config_field = 102,  // a field is missing, of the wrong type or out of range
  io = 103,            // a file could not be read or written

  // Identity and compatibility, spec 0x01A (2xx).
  invalid_manifest = 200,  // a manifest violates its own structural rules
  incompatible = 201,      // producer/consumer differ on an equality-bearing field
  stale_generation = 202,  // a namespace/model/pool generation is not current

  // Address translation, spec 0x03I rejection order (3xx).
  request_not_visible = 300,  // token outside the request's logical context
  table_out_of_bounds = 301,  // logical block beyond the group table
  unknown_physical = 302,     // physical id has no descriptor in this pool
  stale_physical = 303,       // descriptor exists under another pool generation
  row_not_valid = 304,        // token offset at/after the physical valid frontier
  coordinate_out_of_range = 305,
  layer_gap = 306,  // a layer belongs to no cache group, or to two
  duplicate_axis = 307,
  table_length_drift = 308,  // group tables of one request disagree in length
  overlapping_tensors = 309,
  stale_table_version = 310,
  kernel_block_not_divisor = 311,
  unknown_request = 312,
  unknown_group = 313,
  address_out_of_tensor = 314,
  slot_reuse = 315,       // two live descriptors of one pool claim one physical slot
  bundle_mismatch = 316,  // one logical block names different Loop 3 bundles in two groups

  // Codec (4xx).
  decode_failed = 400,      // bytes are not a valid message of the expected type
  message_too_large = 401,  // exceeds the reader's traversal or nesting limit
  unknown_enum = 402,

  // Accounting ledgers, spec 0x02B-0x02G and 0x0D (5xx).
  ledger_identity_broken = 500,  // a reconciliation identity of 0x0D fails (field names it)

  // Physical storage: shared-memory pool segments (docs/architecture.md, physical storage) (6xx).
  storage_exhausted = 600,  // the host cannot back the requested bytes (e.g. /dev/shm full)
  segment_in_use = 601,     // a named segment belongs to a live owner and is kept

  // Prefix and radix indexes, spec 0x07-0x08 (7xx).
  unknown_node = 700,            // a radix node id/reference names no live node
  locked_node_eviction = 701,    // eviction of a node protected by a lock reference (0x08D)
  internal_node_eviction = 702,  // eviction of a node that still has children (0x08E)
  lock_underflow = 703,          // releasing a lock reference that is not held
  owned_slot_reuse = 704,        // a slot offered for publication already has another owner (0x08A)
  stale_tree_version = 705,      // a receipt read a tree version that has moved (0x08G)
  path_slot_mismatch = 706,      // path nodes, slots, tokens or suffix disagree with the tree
  receipt_tampered = 707,        // a receipt's digest does not cover its fields
  unknown_lease = 708,           // a lock lease that is not held (or of the wrong kind)
  page_misaligned = 709,         // a boundary is not a multiple of the page size (0x08)
  digest_collision = 710,        // equal block digest over different token ids (0x07F witness)

  // Virtual-memory mapper, spec 0x06-0x06I (8xx).
  page_not_mapped = 800,         // a row/address lies beyond the slot's mapped frontier (map before use, 0x06D)
  half_mapped_frontier = 801,    // a frontier receipt lacks some K/V layer tensor of a page (0x06D)
  stale_slot_generation = 802,   // a slot generation that has since been re-bound (0x06B, 0x06E)
  rows_not_valid = 803,          // rows the current slot generation has not written (0x06E: retained
                                 // mapping is capacity, not a prefix hit)
  slots_exhausted = 804,         // no inactive request slot can be bound (0x06B alloc_reqid)
  mapper_shut_down = 805,        // an operation after shutdown (0x06B)
  os_mapping_failed = 806,       // mmap/memfd refused a reservation or mapping (field names the call)
  pool_fd_missing = 807,         // a page-pool message carried no pool fd, or more than one (SCM_RIGHTS)
  pool_message_truncated = 808,  // a page-pool message is shorter than its header and entries say
  pool_message_bad_magic = 809,  // a page-pool message is not one (magic or version differ)
  pool_size_mismatch = 810,      // fstat size or seals of a received pool fd disagree with its header

  // Owner invariants (9xx): validate() found a broken conservation law, a kvrt bug.
  invariant_violated = 900,
  // Not a bug: an armed fault point of a fault-injection run ([node]
  // fault_injection) fired inside this transaction, which ended there and
  // handed back what it held (0x04F). The caller carries on without it.
  fault_injected = 901,

  // Kernel executor, spec 0x0A-0x0BN (11xx). Address-level refusals keep their
  // 3xx codes (row_not_valid for a read past a physical valid frontier,
  // kernel_block_not_divisor for P_k not dividing P_a, stale_physical, ...).
  executor_stale_snapshot = 1100,      // snapshot tree version/digest differs from the caller's fence (0x0BB)
  executor_coverage_overlap = 1101,    // a key position or a sequence is covered twice (0x0BA, 0x0BB)
  executor_coverage_gap = 1102,        // a key position or a sequence is covered by no chunk (0x0BA, 0x0BB)
  executor_head_mapping = 1103,        // H_q, H_kv or the GQA group disagree between queries, snapshot and pool
  executor_frontier_mismatch = 1104,   // a sequence's context frontier disagrees with what its path or table covers
  executor_shape_mismatch = 1105,      // a query/output/LSE buffer or head width disagrees with the arguments
  executor_unsupported_dtype = 1106,   // a storage dtype the executor has no conversion for (fp8, int8)
  executor_view_out_of_bounds = 1107,  // a pool view whose strides/extents reach past its bytes

  // Namespace / authorization owner, spec 0x0CE (12xx).
  authorization_unauthenticated = 1200,    // a bearer token matches no live principal
  authorization_principal_revoked = 1201,  // the principal was revoked (worker gone); its grants ended
  authorization_namespace_denied = 1202,   // the principal may not use this namespace
  authorization_unknown_namespace = 1203,  // no namespace of that name is configured
  authorization_stale_generation = 1204,   // a grant names a namespace generation that is no longer current
  authorization_grant_ended = 1205,        // a grant id that was never issued, or has ended
  authorization_namespace_closed = 1206,   // the generation stopped admitting (purge step 1 of 0x0CE)
  authorization_purge_pending = 1207,      // a purge step whose precondition does not hold yet
  authorization_unknown_hold = 1208,       // a lease/receipt hold that is not live (released twice)
  authorization_route_denied = 1209,       // a worker session called an admin route, or an admin session a worker route

  // Executable-reuse transaction, spec 0x0CD (13xx).
  reuse_step_out_of_order = 1300,  // evidence for a step other than the attempt's next one
  reuse_attempt_closed = 1301,     // a step after the attempt was rejected or completed
  reuse_evidence_mismatch = 1302,  // evidence that cannot belong to this attempt (ids, leases, interval)
  reuse_receipt_revoked = 1303,    // a purge of the receipt's namespace generation revoked it (0x0CE step 4)

  // Node runtime (14xx): sessions and the actor transport.
  not_owner = 1400,           // the object belongs to another worker session
  node_unreachable = 1401,    // the node (or its gateway) cannot be reached or refused the connection
  rpc_timeout = 1402,         // no receipt within the caller's deadline
  rpc_failed = 1403,          // the transport answered an error instead of a receipt (field: CAF's text)
  session_ended = 1404,       // the worker's session was closed by the node
  descriptor_invalid = 1405,  // a node descriptor file is missing, unreadable or malformed
  node_lost = 1406,           // the session's node exited, restarted or stopped answering: nothing it issued
                              // (receipts, handles, leases) is valid any more; connect again
  descriptor_in_use = 1407,   // a live node already serves this descriptor path

  // Telemetry, spec 0x0CE "Telemetry Hygiene" and 0x0CF (15xx).
  telemetry_forbidden_label = 1500,     // a metric label carries a raw prompt, token list or unsalted key
  telemetry_counter_regression = 1501,  // a later counter snapshot is behind an earlier one

  // `kvrt run` (16xx): the node-and-workers composition.
  run_stalled = 1600,        // a worker made no progress: the pools cannot hold its requests
  run_worker_failed = 1601,  // a worker process exited with an error or was killed
  run_interrupted = 1602,    // SIGINT/SIGTERM stopped the run (the node was shut down cleanly)
};

std::string_view to_string(ErrorCode code);

// Error carried by value: what failed (code), why (reason, with operands), and
// which field or version failed (field), so a client can act on it.
struct Error {
  ErrorCode code = ErrorCode::ok;
  std::string reason;
  std::string field;

  std::string describe() const;  // "code: reason [field]"
  friend bool operator==(const Error&, const Error&) = default;
};

Error make_error(ErrorCode code, std::string reason, std::string field = {});

}  // namespace kvrt
