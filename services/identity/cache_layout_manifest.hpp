#pragma once
// CacheLayoutManifest (spec 0x01A): how the bytes of one published cache
// generation can be addressed. It freezes the interpretation of every later
// block-table or page-map entry; changing any field yields a different digest
// and therefore a different physical identity.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

// Stored scalar representation of K or V. The numeric values travel in the
// schema; never renumber.
enum class ScalarType : uint8_t { fp32 = 0, fp16 = 1, bf16 = 2, fp8_e4m3 = 3, int8 = 4 };
uint32_t scalar_bytes(ScalarType t);
std::string_view to_string(ScalarType t);
std::optional<ScalarType> scalar_type_from_string(std::string_view s);

enum class PhysicalMode : uint8_t { rectangular = 0, paged_blocks = 1, virtual_pages = 2 };
std::string_view to_string(PhysicalMode m);
std::optional<PhysicalMode> physical_mode_from_string(std::string_view s);

// The five axes of one K or V tensor of a cache group (spec 0x03E, 0x03I).
// axis_order lists them outermost first; strides are row-major over that order.
enum class TensorAxis : uint8_t {
  layer_local = 0,
  physical_slot = 1,
  token_offset = 2,
  kv_head = 3,
  head_dim = 4,
};
inline constexpr size_t kTensorAxisCount = 5;
std::string_view to_string(TensorAxis a);
std::optional<TensorAxis> tensor_axis_from_string(std::string_view s);

// Hash family of the prefix index's chain (spec 0x07B). Part of identity: two
// families never produce comparable keys.
enum class HashFamily : uint8_t { sha256 = 0, xxh3_bits128 = 1 };
std::string_view to_string(HashFamily h);
std::optional<HashFamily> hash_family_from_string(std::string_view s);

struct CacheGroupLayout {
  CacheGroupId group_id;
  uint32_t layer_start = 0;     // first model layer of the group [layers]
  uint32_t layer_end = 0;       // one past the group's last model layer [layers]
  uint32_t kv_heads_local = 0;  // K/V heads owned by this TP rank [heads]
  uint32_t head_dim = 0;        // lanes per head [scalars]
  ScalarType k_dtype = ScalarType::fp16;
  ScalarType v_dtype = ScalarType::fp16;
  std::vector<TensorAxis> axis_order;  // outermost first; a permutation of all five axes
  std::string stride_identity = "row_major";

  uint32_t layers() const { return layer_end - layer_start; }
  // B_row,g = L_g * H_kv,g * d_h,g * (b_K + b_V)  [bytes / token / local rank] (0x02A)
  uint64_t row_bytes() const;
  // Bytes of one token's K (or V) across the group's layers.
  uint64_t k_row_bytes() const;
  uint64_t v_row_bytes() const;
  bool contains_layer(uint32_t layer) const { return layer >= layer_start && layer < layer_end; }

  friend bool operator==(const CacheGroupLayout&, const CacheGroupLayout&) = default;
};

struct CacheLayoutManifest {
  uint32_t schema_version = 1;
  std::string manifest_id;
  std::string logical_cache_abi_sha256;  // consumed from M5.1, 64 hex chars
  uint64_t model_generation = 0;
  std::vector<CacheGroupLayout> cache_groups;
  PhysicalMode physical_mode = PhysicalMode::paged_blocks;
  uint32_t allocator_block_size = 16;  // P_a [tokens / allocator block]
  uint32_t kernel_block_size = 16;     // P_k [tokens / kernel block]; must divide P_a (0x0AC)
  uint32_t hash_block_size = 16;       // [tokens / hash block] (0x07B)
  uint32_t scheduler_block_size = 16;  // [tokens] granularity the scheduler reasons in
  uint64_t physical_page_bytes = 0;    // G [bytes / page group], virtual_pages mode only
  uint32_t tp_world_size = 1;
  uint32_t tp_rank = 0;
  std::string quantization_schema = "none";
  std::string position_contract_id;
  uint32_t allocator_revision = 1;
  HashFamily hash_family = HashFamily::sha256;

  // Sum of every group's B_row [bytes / token / local rank] (0x02A).
  uint64_t row_bytes() const;
  // Model layers covered: 0 .. layer_count()-1 (valid manifests only).
  uint32_t layer_count() const;
  // The unique group containing a model layer, or nullptr.
  const CacheGroupLayout* group_for_layer(uint32_t layer) const;
  const CacheGroupLayout* group(CacheGroupId id) const;

  // Structural rules: non-empty groups, layer intervals that tile [0, L) with
  // no gap or overlap, axis order a permutation of the five axes, positive
  // sizes, P_k | P_a, tp_rank < tp_world_size, a 64-hex ABI digest.
  Status validate() const;

  // Canonical SHA-256 over every field (cache_layout_sha256 of 0x01A).
  Sha256Digest digest() const;

  friend bool operator==(const CacheLayoutManifest&, const CacheLayoutManifest&) = default;
};

}  // namespace kvrt
