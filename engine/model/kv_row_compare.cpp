#include "engine/model/kv_row_compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "services/executor/scalar_convert.hpp"

namespace kvrt::model {
namespace {

// Difference of one scalar pair (the header's convention).
double scalar_difference(double a, double b) {
  if (a == b) return 0.0;
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  return std::abs(a - b) / std::max(1.0, std::abs(b));
}

// Largest difference over n scalars of `dtype` starting at a and b.
double part_difference(ScalarType dtype, const uint8_t* a, const uint8_t* b, uint64_t n) {
  const uint32_t bytes = scalar_bytes(dtype);
  double worst = 0.0;
  for (uint64_t i = 0; i < n; ++i)
    worst = std::max(worst, scalar_difference(executor::load_scalar(dtype, a + i * bytes),
                                              executor::load_scalar(dtype, b + i * bytes)));
  return worst;
}

}  // namespace

Result<double> canonical_row_difference(const CacheLayoutManifest& layout, uint32_t group_index,
                                        std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (group_index >= layout.cache_groups.size())
    return make_error(ErrorCode::unknown_group,
                      "group index " + std::to_string(group_index) + " of a layout with " +
                          std::to_string(layout.cache_groups.size()) + " cache groups",
                      "group_index");
  const CacheGroupLayout& g = layout.cache_groups[group_index];
  const std::string group_field = "layout.cache_groups[" + std::to_string(group_index) + "]";
  KVRT_TRY(executor::check_storage_dtype(g.k_dtype, (group_field + ".k_dtype").c_str()));
  KVRT_TRY(executor::check_storage_dtype(g.v_dtype, (group_field + ".v_dtype").c_str()));
  const uint64_t row = g.row_bytes();
  if (a.size() != row)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(a.size()) + " bytes, a row of group " + std::to_string(group_index) + " has " +
                          std::to_string(row),
                      "a");
  if (b.size() != row)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(b.size()) + " bytes, a row of group " + std::to_string(group_index) + " has " +
                          std::to_string(row),
                      "b");
  const uint64_t scalars = uint64_t{g.layers()} * g.kv_heads_local * g.head_dim;  // of K, and of V [scalars]
  const uint64_t k_bytes = g.k_row_bytes();
  return std::max(part_difference(g.k_dtype, a.data(), b.data(), scalars),
                  part_difference(g.v_dtype, a.data() + k_bytes, b.data() + k_bytes, scalars));
}

}  // namespace kvrt::model
