#pragma once
// The checked transaction order of the executable-reuse transaction (spec
// 0x0CD). Steps count from 1, as the spec numbers them; the wire's value 0
// is no step and is refused on read (schema/reuse.capnp).
#include <cstdint>
#include <string_view>

namespace kvrt {

enum class ReuseStep : uint8_t {
  authorize = 1,           // authorize namespace before any cache-existence lookup
  build_key = 2,           // build semantic/layout key and validate namespace generation
  lookup_candidate = 3,    // lookup candidate; retain collision witness if policy requires it
  acquire_leases = 4,      // acquire path and physical-object leases
  validate_versions = 5,   // index version, tree version, pool generation, valid frontiers
  validate_positions = 6,  // declared-module positions or session interval when applicable
  await_mapping = 7,       // physical mapping covers every dereferenced row
  freeze_snapshot = 8,     // freeze immutable execution snapshot and kernel ABI
  execute = 9,
  finish = 10,  // release leases, or publish one complete COW successor atomically
};
inline constexpr uint8_t kReuseStepCount = 10;
std::string_view to_string(ReuseStep s);

}  // namespace kvrt
