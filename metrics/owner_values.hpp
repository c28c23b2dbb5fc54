#pragma once
// An owner's statistics value by plain owner name, summed over trust
// domains ("allocator@tenant-a" counts as "allocator"), as `kvrt stats`
// sums them. Absent values read 0.
#include <cstdint>
#include <string_view>
#include <vector>

#include "schema/session_types.hpp"

namespace kvrt::metrics {

class OwnerValues {
 public:
  explicit OwnerValues(const std::vector<OwnerStats>& owners) : owners_(owners) {}
  int64_t operator()(std::string_view owner, std::string_view name) const {
    int64_t sum = 0;
    for (const StatValue* v : find(owner, name)) sum += v->value;
    return sum;
  }
  // Like operator(), but clamped at 0 for counts that cannot be negative.
  uint64_t count(std::string_view owner, std::string_view name) const {
    const int64_t v = (*this)(owner, name);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
  bool has(std::string_view owner, std::string_view name) const { return !find(owner, name).empty(); }
  const std::vector<OwnerStats>& all() const { return owners_; }

 private:
  std::vector<const StatValue*> find(std::string_view owner, std::string_view name) const {
    std::vector<const StatValue*> out;
    for (const OwnerStats& o : owners_) {
      if (std::string_view(o.owner).substr(0, o.owner.find('@')) != owner) continue;
      for (const StatValue& v : o.values)
        if (v.name == name) out.push_back(&v);
    }
    return out;
  }
  const std::vector<OwnerStats>& owners_;
};

}  // namespace kvrt::metrics
