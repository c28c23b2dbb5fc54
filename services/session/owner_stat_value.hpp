#pragma once
// One value of a node's owner statistics by owner and name. A node with
// pools per trust domain ([node] domain_pools) reports each domain's owner
// as "<owner>@<domain>": asked by its plain name, the value is their sum.
// nullopt: no owner reports it.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "schema/session_types.hpp"

namespace kvrt {

inline std::optional<int64_t> owner_stat_value(std::span<const OwnerStats> owners, std::string_view owner,
                                               std::string_view name) {
  std::optional<int64_t> exact, sum;
  for (const OwnerStats& o : owners) {
    const std::string_view reported(o.owner);
    const bool same = reported == owner;
    if (!same && !(reported.size() > owner.size() && reported.starts_with(owner) && reported[owner.size()] == '@'))
      continue;
    for (const StatValue& v : o.values) {
      if (v.name != name) continue;
      if (same)
        exact = v.value;
      else
        sum = sum.value_or(0) + v.value;
      break;
    }
    if (same) return exact;  // an owner reported by its plain name has no domains
  }
  return sum;
}

}  // namespace kvrt
