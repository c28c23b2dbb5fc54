#pragma once
// The owner statistics the metric families read (services/session/
// owner_stat_value.hpp: summed over trust domains), absent values as 0.
#include <cstdint>
#include <string_view>
#include <vector>

#include "services/session/owner_stat_value.hpp"

namespace kvrt::metrics {

class OwnerValues {
 public:
  explicit OwnerValues(const std::vector<OwnerStats>& owners) : owners_(owners) {}
  int64_t operator()(std::string_view owner, std::string_view name) const {
    return owner_stat_value(owners_, owner, name).value_or(0);
  }
  // Like operator(), clamped at 0 for counts that cannot be negative.
  uint64_t count(std::string_view owner, std::string_view name) const {
    const int64_t v = (*this)(owner, name);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
  bool has(std::string_view owner, std::string_view name) const {
    return owner_stat_value(owners_, owner, name).has_value();
  }
  const std::vector<OwnerStats>& all() const { return owners_; }

 private:
  const std::vector<OwnerStats>& owners_;
};

}  // namespace kvrt::metrics
