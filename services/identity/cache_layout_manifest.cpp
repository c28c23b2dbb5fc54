#include "services/identity/cache_layout_manifest.hpp"

#include <algorithm>
#include <array>

namespace kvrt {
namespace {

template <class Enum, size_t N>
std::optional<Enum> lookup(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<Enum>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 5> kScalarNames{"fp32", "fp16", "bf16", "fp8_e4m3", "int8"};
constexpr std::array<std::string_view, 3> kModeNames{"rectangular", "paged_blocks", "virtual_pages"};
constexpr std::array<std::string_view, 5> kAxisNames{"layer_local", "physical_slot", "token_offset", "kv_head",
                                                     "head_dim"};
constexpr std::array<std::string_view, 2> kHashNames{"sha256", "xxh3_128"};

bool is_hex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

uint32_t scalar_bytes(ScalarType t) {
  switch (t) {
    case ScalarType::fp32:
      return 4;
    case ScalarType::fp16:
      return 2;
    case ScalarType::bf16:
      return 2;
    case ScalarType::fp8_e4m3:
      return 1;
    case ScalarType::int8:
      return 1;
  }
  KVRT_ASSERT(false, "unknown ScalarType");
  return 0;
}

std::string_view to_string(ScalarType t) { return kScalarNames.at(static_cast<size_t>(t)); }
std::optional<ScalarType> scalar_type_from_string(std::string_view s) { return lookup<ScalarType>(kScalarNames, s); }
std::string_view to_string(PhysicalMode m) { return kModeNames.at(static_cast<size_t>(m)); }
std::optional<PhysicalMode> physical_mode_from_string(std::string_view s) {
  return lookup<PhysicalMode>(kModeNames, s);
}
std::string_view to_string(TensorAxis a) { return kAxisNames.at(static_cast<size_t>(a)); }
std::optional<TensorAxis> tensor_axis_from_string(std::string_view s) { return lookup<TensorAxis>(kAxisNames, s); }
std::string_view to_string(HashFamily h) { return kHashNames.at(static_cast<size_t>(h)); }
std::optional<HashFamily> hash_family_from_string(std::string_view s) { return lookup<HashFamily>(kHashNames, s); }

uint64_t CacheGroupLayout::k_row_bytes() const {
  return uint64_t{layers()} * kv_heads_local * head_dim * scalar_bytes(k_dtype);
}
uint64_t CacheGroupLayout::v_row_bytes() const {
  return uint64_t{layers()} * kv_heads_local * head_dim * scalar_bytes(v_dtype);
}
uint64_t CacheGroupLayout::row_bytes() const { return k_row_bytes() + v_row_bytes(); }

uint64_t CacheLayoutManifest::row_bytes() const {
  uint64_t total = 0;
  for (const auto& g : cache_groups) total += g.row_bytes();
  return total;
}

uint32_t CacheLayoutManifest::layer_count() const {
  uint32_t end = 0;
  for (const auto& g : cache_groups) end = std::max(end, g.layer_end);
  return end;
}

const CacheGroupLayout* CacheLayoutManifest::group_for_layer(uint32_t layer) const {
  for (const auto& g : cache_groups)
    if (g.contains_layer(layer)) return &g;
  return nullptr;
}

const CacheGroupLayout* CacheLayoutManifest::group(CacheGroupId id) const {
  for (const auto& g : cache_groups)
    if (g.group_id == id) return &g;
  return nullptr;
}

Status CacheLayoutManifest::validate() const {
  if (schema_version != 1)
    return make_error(ErrorCode::invalid_manifest,
                      "unsupported schema_version " + std::to_string(schema_version) + " (expected 1)",
                      "schema_version");
  if (manifest_id.empty()) return make_error(ErrorCode::invalid_manifest, "manifest_id is empty", "manifest_id");
  if (!is_hex64(logical_cache_abi_sha256))
    return make_error(ErrorCode::invalid_manifest, "logical_cache_abi_sha256 must be 64 lowercase hex digits",
                      "logical_cache_abi_sha256");
  if (cache_groups.empty())
    return make_error(ErrorCode::invalid_manifest, "at least one cache group is required", "cache_groups");
  if (allocator_block_size == 0 || kernel_block_size == 0 || hash_block_size == 0 || scheduler_block_size == 0)
    return make_error(ErrorCode::invalid_manifest, "block sizes must be positive", "allocator_block_size");
  // 0x0AC: allocator blocks may be split for a kernel, never merged.
  if (allocator_block_size % kernel_block_size != 0)
    return make_error(ErrorCode::kernel_block_not_divisor,
                      "kernel_block_size " + std::to_string(kernel_block_size) +
                          " does not divide allocator_block_size " + std::to_string(allocator_block_size),
                      "kernel_block_size");
  if (physical_mode == PhysicalMode::virtual_pages && physical_page_bytes == 0)
    return make_error(ErrorCode::invalid_manifest, "virtual_pages mode needs physical_page_bytes > 0",
                      "physical_page_bytes");
  if (tp_world_size == 0 || tp_rank >= tp_world_size)
    return make_error(
        ErrorCode::invalid_manifest,
        "tp_rank " + std::to_string(tp_rank) + " is outside tp_world_size " + std::to_string(tp_world_size), "tp_rank");
  if (position_contract_id.empty())
    return make_error(ErrorCode::invalid_manifest, "position_contract_id is empty", "position_contract_id");
  if (quantization_schema.empty())
    return make_error(ErrorCode::invalid_manifest, "quantization_schema is empty (use \"none\")",
                      "quantization_schema");

  // Groups must have distinct ids and tile the layers [0, L) exactly (0x03C:
  // every model layer resolves to exactly one cache group).
  std::vector<const CacheGroupLayout*> by_start;
  for (size_t i = 0; i < cache_groups.size(); ++i) {
    const auto& g = cache_groups[i];
    const std::string where = "cache_groups[" + std::to_string(i) + "]";
    for (size_t j = 0; j < i; ++j)
      if (cache_groups[j].group_id == g.group_id)
        return make_error(ErrorCode::invalid_manifest, "duplicate cache group id " + std::to_string(g.group_id.value),
                          where + ".id");
    if (g.layer_end <= g.layer_start)
      return make_error(
          ErrorCode::invalid_manifest,
          "empty layer interval [" + std::to_string(g.layer_start) + "," + std::to_string(g.layer_end) + ")",
          where + ".layers");
    if (g.kv_heads_local == 0 || g.head_dim == 0)
      return make_error(ErrorCode::invalid_manifest, "kv_heads_local and head_dim must be positive",
                        where + ".kv_heads_local");
    if (g.axis_order.size() != kTensorAxisCount)
      return make_error(ErrorCode::invalid_manifest,
                        "axis_order must name all five axes, got " + std::to_string(g.axis_order.size()),
                        where + ".axis_order");
    std::array<bool, kTensorAxisCount> seen{};
    for (TensorAxis a : g.axis_order) {
      auto idx = static_cast<size_t>(a);
      if (idx >= kTensorAxisCount)
        return make_error(ErrorCode::invalid_manifest, "unknown axis", where + ".axis_order");
      if (seen[idx])
        return make_error(ErrorCode::duplicate_axis, "axis " + std::string(to_string(a)) + " appears twice",
                          where + ".axis_order");
      seen[idx] = true;
    }
    if (g.stride_identity != "row_major")
      return make_error(ErrorCode::invalid_manifest,
                        "unsupported stride_identity \"" + g.stride_identity + "\" (only row_major)",
                        where + ".stride_identity");
    by_start.push_back(&g);
  }
  std::sort(by_start.begin(), by_start.end(), [](auto* a, auto* b) { return a->layer_start < b->layer_start; });
  uint32_t next = 0;
  for (const auto* g : by_start) {
    if (g->layer_start != next)
      return make_error(
          ErrorCode::layer_gap,
          g->layer_start > next
              ? "layers [" + std::to_string(next) + "," + std::to_string(g->layer_start) + ") belong to no cache group"
              : "layer " + std::to_string(g->layer_start) + " belongs to two cache groups",
          "cache_groups");
    next = g->layer_end;
  }
  return Status::success();
}

Sha256Digest CacheLayoutManifest::digest() const {
  CanonicalWriter w("kvrt.CacheLayoutManifest.v1");
  w.u32("schema_version", schema_version)
      .str("manifest_id", manifest_id)
      .str("logical_cache_abi_sha256", logical_cache_abi_sha256)
      .u64("model_generation", model_generation)
      .begin_list("cache_groups", cache_groups.size());
  for (const auto& g : cache_groups) {
    w.u32("group_id", g.group_id.value)
        .u32("layer_start", g.layer_start)
        .u32("layer_end", g.layer_end)
        .u32("kv_heads_local", g.kv_heads_local)
        .u32("head_dim", g.head_dim)
        .u8("k_dtype", static_cast<uint8_t>(g.k_dtype))
        .u8("v_dtype", static_cast<uint8_t>(g.v_dtype))
        .begin_list("axis_order", g.axis_order.size());
    for (TensorAxis a : g.axis_order) w.u8("axis", static_cast<uint8_t>(a));
    w.str("stride_identity", g.stride_identity);
  }
  w.u8("physical_mode", static_cast<uint8_t>(physical_mode))
      .u32("allocator_block_size", allocator_block_size)
      .u32("kernel_block_size", kernel_block_size)
      .u32("hash_block_size", hash_block_size)
      .u32("scheduler_block_size", scheduler_block_size)
      .u64("physical_page_bytes", physical_page_bytes)
      .u32("tp_world_size", tp_world_size)
      .u32("tp_rank", tp_rank)
      .str("quantization_schema", quantization_schema)
      .str("position_contract_id", position_contract_id)
      .u32("allocator_revision", allocator_revision)
      .u8("hash_family", static_cast<uint8_t>(hash_family));
  return w.finish();
}

}  // namespace kvrt
