#pragma once
// Why two CacheLayoutManifests have different digests (spec 0x01A
// "CacheLayoutManifest: How The Bytes Can Be Addressed"). compatible() can only
// say that cache_layout_sha256 differs; when both layouts are at hand this
// names the field: "same byte count + different TP rank", "same scalar bytes +
// different dtype or quantization schema", "same block_id + different
// cache_group_id", "same token block size + different axis/stride identity".
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

// What a differing layout field changes, in the order differences are reported.
// The order follows the spec's list above: ownership of the bytes first, then
// their numerical and address interpretation, then the position contract; the
// logical facts M5.1 owns and pure labels come last, so a renamed manifest_id
// never hides the TP rank that actually moved.
enum class LayoutAspect : uint8_t {
  ownership = 0,       // tp_world_size, tp_rank, cache group count/ids/layers, kv_heads_local
  representation = 1,  // dtypes, quantization, axis order, strides, physical mode, block sizes,
                       // page bytes, hash family, allocator revision
  position = 2,        // position_contract_id
  logical = 3,         // logical_cache_abi_sha256, model_generation, head_dim (owned by M5.1)
  label = 4,           // schema_version, manifest_id
};
std::string_view to_string(LayoutAspect a);

struct LayoutFieldDifference {
  LayoutAspect aspect = LayoutAspect::label;
  std::string field;     // path as in the TOML and validate(): "tp_rank", "cache_groups[1].k_dtype"
  std::string producer;  // rendered value: numbers bare, strings quoted, layers "[0,24)"
  std::string consumer;
  std::string operands;  // "producer X vs consumer Y", abbreviated for long values
};

// Every field on which the two layouts differ, in LayoutAspect order (within
// an aspect: cache groups by index, fields in digest order). Empty exactly when
// producer.digest() == consumer.digest(): every digested field is compared.
std::vector<LayoutFieldDifference> diff_layouts(const CacheLayoutManifest& producer,
                                                const CacheLayoutManifest& consumer);

// Success when the layouts are identical; otherwise ErrorCode::incompatible
// naming the first difference in `field`, with both operands and the names of
// any further differing fields in `reason`.
Status explain_layout_mismatch(const CacheLayoutManifest& producer, const CacheLayoutManifest& consumer);

}  // namespace kvrt
