#pragma once
// Typed caller errors (STYLE.md habit 4): a caller's broken precondition is a
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
  config_parse = 101,        // a TOML file is malformed (file:line:column in reason)
  config_field = 102,        // a field is missing, of the wrong type or out of range
  io = 103,                  // a file could not be read or written

  // Identity and compatibility, spec 0x01A (2xx).
  invalid_manifest = 200,    // a manifest violates its own structural rules
  incompatible = 201,        // producer/consumer differ on an equality-bearing field
  stale_generation = 202,    // a namespace/model/pool generation is not current

  // Address translation, spec 0x03I rejection order (3xx).
  request_not_visible = 300,   // token outside the request's logical context
  table_out_of_bounds = 301,   // logical block beyond the group table
  unknown_physical = 302,      // physical id has no descriptor in this pool
  stale_physical = 303,        // descriptor exists under another pool generation
  row_not_valid = 304,         // token offset at/after the physical valid frontier
  coordinate_out_of_range = 305,
  layer_gap = 306,             // a layer belongs to no cache group, or to two
  duplicate_axis = 307,
  table_length_drift = 308,    // group tables of one request disagree in length
  overlapping_tensors = 309,
  stale_table_version = 310,
  kernel_block_not_divisor = 311,
  unknown_request = 312,
  unknown_group = 313,
  address_out_of_tensor = 314,

  // Codec (4xx).
  decode_failed = 400,       // bytes are not a valid message of the expected type
  message_too_large = 401,   // exceeds the reader's traversal or nesting limit
  unknown_enum = 402,
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
