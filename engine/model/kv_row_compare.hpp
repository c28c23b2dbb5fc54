#pragma once
// Closeness of two canonical K/V token rows, for checks that cannot
// be bitwise: shared-prefix decode against forward()
// (engine/model/shared_prefix_decode.cpp states the bound it meets).
#include <cstdint>
#include <span>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::model {

// Largest |a - b| / max(1, |b|) over the widened scalars of two canonical
// token rows of cache group g: L_g * H_kv,g * d_h K scalars of k_dtype, then
// as many V scalars of v_dtype (services/allocator/payload_store.hpp
// canonical order), each widened exactly to binary64. b is the reference: the
// max(1, |b|) denominator makes the figure relative for |b| >= 1 and absolute
// below, so an fp16 ulp never counts more than 2^-10. Equal values (equal
// infinities too) differ by 0; a NaN on either side, or an infinity against
// anything else, counts as an infinite difference.
// Errors: unknown_group ("group_index"); invalid_argument when a or b is not
// B_row,g bytes ("a", "b"); executor_unsupported_dtype for a dtype the
// executor cannot widen (fp8, int8).
Result<double> canonical_row_difference(const CacheLayoutManifest& layout, uint32_t group_index,
                                        std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace kvrt::model
