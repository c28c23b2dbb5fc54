#pragma once
// An allocation refused because the blocks of its reuse hit are gone: a
// purge of the namespace (0x0CE step 4) revoked the executable-reuse receipt
// between the reuse message and the allocation, its leases went back, and the
// allocator no longer holds those blocks as the receipt named them (freed,
// recycled to another owner, or cut short). The allocator refuses such a hit
// by the bundle (field "bundles[i]..."): nothing was read, and the request is
// served again (or dropped by a worker that makes up its requests) without
// that hit. Any other refusal of an allocation stays an error.
#include <string_view>

#include "services/common/error.hpp"

namespace kvrt::engine {

inline bool is_withdrawn_hit(const Error& e) {
  const bool handle_gone = e.code == ErrorCode::unknown_physical || e.code == ErrorCode::stale_physical ||
                           e.code == ErrorCode::row_not_valid;
  return handle_gone && std::string_view(e.field).starts_with("bundles[");
}

}  // namespace kvrt::engine
