#include "services/radix/radix_options.hpp"

#include <array>
#include <string>

namespace kvrt {

namespace {
constexpr std::array<std::pair<std::string_view, EvictionPolicy>, 7> kPolicies{{
    {"lru", EvictionPolicy::lru},
    {"lfu", EvictionPolicy::lfu},
    {"fifo", EvictionPolicy::fifo},
    {"mru", EvictionPolicy::mru},
    {"filo", EvictionPolicy::filo},
    {"priority", EvictionPolicy::priority},
    {"slru", EvictionPolicy::slru},
}};
}  // namespace

std::string_view to_string(EvictionPolicy policy) {
  for (const auto& [name, p] : kPolicies)
    if (p == policy) return name;
  return "unknown";
}

Result<EvictionPolicy> parse_eviction_policy(std::string_view name) {
  for (const auto& [n, p] : kPolicies)
    if (n == name) return p;
  return make_error(
      ErrorCode::invalid_argument,
      "unknown eviction policy '" + std::string(name) + "' (expected lru, lfu, fifo, mru, filo, priority or slru)",
      "eviction_policy");
}

Status RadixOptions::validate() const {
  if (page_size == 0) return make_error(ErrorCode::invalid_argument, "page_size must be >= 1 token", "page_size");
  // A page is compared as one child-selector key; very large pages would make
  // every lookup hash kilobytes. 2^16 tokens is far above any real page.
  if (page_size > 65536)
    return make_error(ErrorCode::invalid_argument, "page_size " + std::to_string(page_size) + " exceeds 65536 tokens",
                      "page_size");
  if (slru_protected_hits == 0)
    return make_error(ErrorCode::invalid_argument, "slru_protected_hits must be >= 1", "slru_protected_hits");
  return Status::success();
}

}  // namespace kvrt
