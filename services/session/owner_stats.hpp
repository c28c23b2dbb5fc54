#pragma once
// OwnerStats: one owner's gauges and counters as read live from a running
// node (`kvrt stats`, issue 5). Names are stable snake_case identifiers with
// no tokens, prompts or unsalted keys in them (0x0CE telemetry hygiene).
#include <cstdint>
#include <string>
#include <vector>

namespace kvrt {

struct StatValue {
  std::string name;  // e.g. "pool0_free_blocks"
  int64_t value = 0;
  friend bool operator==(const StatValue&, const StatValue&) = default;
};

struct OwnerStats {
  std::string owner;           // "allocator", "prefix_index", ...
  bool validate_ok = false;    // the owner's validate() on its current state
  std::string validate_error;  // empty when validate_ok
  std::vector<StatValue> values;
  friend bool operator==(const OwnerStats&, const OwnerStats&) = default;
};

}  // namespace kvrt
