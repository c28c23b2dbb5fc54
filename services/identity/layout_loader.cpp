#include "services/identity/layout_loader.hpp"

#include "services/common/toml_reader.hpp"

namespace kvrt {
namespace {

template <class Enum, class Parse>
Result<Enum> parse_enum(const TomlReader& r, const toml::table& t, const std::string& where, const std::string& field,
                        std::optional<std::string> fallback, Parse parse, const char* allowed) {
  auto s = r.string(t, where, field, std::move(fallback));
  if (!s.ok()) return s.error();
  auto v = parse(*s);
  if (!v) return r.field_error(t.get(field), where, field, "unknown value \"" + *s + "\"; expected one of " + allowed);
  return *v;
}

Result<CacheLayoutManifest> from_reader(const TomlReader& r) {
  const toml::table& root = r.root();
  CacheLayoutManifest m;
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "schema_version", 1, 1, 1));
  m.schema_version = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(m.manifest_id, r.string(root, "", "manifest_id"));
  KVRT_TRY_ASSIGN(m.logical_cache_abi_sha256, r.string(root, "", "logical_cache_abi_sha256"));
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "model_generation", std::nullopt, 0));
  m.model_generation = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(m.physical_mode,
                  parse_enum<PhysicalMode>(r, root, "", "physical_mode", "paged_blocks", physical_mode_from_string,
                                           "rectangular, paged_blocks, virtual_pages"));
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "allocator_block_size", std::nullopt, 1, 1 << 20));
  m.allocator_block_size = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "kernel_block_size", m.allocator_block_size, 1, 1 << 20));
  m.kernel_block_size = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "hash_block_size", m.allocator_block_size, 1, 1 << 20));
  m.hash_block_size = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "scheduler_block_size", m.allocator_block_size, 1, 1 << 20));
  m.scheduler_block_size = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "physical_page_bytes", 0, 0));
  m.physical_page_bytes = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "tp_world_size", 1, 1, 1 << 16));
  m.tp_world_size = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "tp_rank", 0, 0, 1 << 16));
  m.tp_rank = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(m.quantization_schema, r.string(root, "", "quantization_schema", "none"));
  KVRT_TRY_ASSIGN(m.position_contract_id, r.string(root, "", "position_contract_id"));
  KVRT_TRY_ASSIGN(v, r.integer(root, "", "allocator_revision", 1, 0, UINT32_MAX));
  m.allocator_revision = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(m.hash_family, parse_enum<HashFamily>(r, root, "", "hash_family", "sha256", hash_family_from_string,
                                                        "sha256, xxh3_128"));

  const toml::node* groups_node = root.get("cache_groups");
  const toml::array* groups = groups_node ? groups_node->as_array() : nullptr;
  if (groups == nullptr || groups->empty())
    return r.field_error(groups_node ? groups_node : &root, "", "cache_groups",
                         "is required: one [[cache_groups]] table per cache group");
  for (size_t i = 0; i < groups->size(); ++i) {
    const std::string where = "cache_groups[" + std::to_string(i) + "]";
    const toml::table* gt = groups->get(i)->as_table();
    if (gt == nullptr) return r.field_error(groups->get(i), "", where, "must be a table");
    CacheGroupLayout g;
    KVRT_TRY_ASSIGN(v, r.integer(*gt, where, "id", static_cast<int64_t>(i), 0, UINT32_MAX));
    g.group_id = CacheGroupId{static_cast<uint32_t>(v)};
    std::vector<int64_t> layers;
    KVRT_TRY_ASSIGN(layers, r.integer_array(*gt, where, "layers"));
    if (layers.size() != 2 || layers[0] < 0 || layers[1] < 0 || layers[1] > (1 << 20))
      return r.field_error(gt->get("layers"), where, "layers",
                           "must be [first_layer, one_past_last_layer] with non-negative values");
    g.layer_start = static_cast<uint32_t>(layers[0]);
    g.layer_end = static_cast<uint32_t>(layers[1]);
    KVRT_TRY_ASSIGN(v, r.integer(*gt, where, "kv_heads_local", std::nullopt, 1, 1 << 16));
    g.kv_heads_local = static_cast<uint32_t>(v);
    KVRT_TRY_ASSIGN(v, r.integer(*gt, where, "head_dim", std::nullopt, 1, 1 << 16));
    g.head_dim = static_cast<uint32_t>(v);
    const char* dtypes = "fp32, fp16, bf16, fp8_e4m3, int8";
    KVRT_TRY_ASSIGN(g.k_dtype,
                    parse_enum<ScalarType>(r, *gt, where, "k_dtype", std::nullopt, scalar_type_from_string, dtypes));
    KVRT_TRY_ASSIGN(g.v_dtype,
                    parse_enum<ScalarType>(r, *gt, where, "v_dtype", std::nullopt, scalar_type_from_string, dtypes));
    std::vector<std::string> axes;
    KVRT_TRY_ASSIGN(axes, r.string_array(*gt, where, "axis_order"));
    for (const auto& a : axes) {
      auto axis = tensor_axis_from_string(a);
      if (!axis)
        return r.field_error(
            gt->get("axis_order"), where, "axis_order",
            "unknown axis \"" + a + "\"; expected layer_local, physical_slot, token_offset, kv_head, head_dim");
      g.axis_order.push_back(*axis);
    }
    KVRT_TRY_ASSIGN(g.stride_identity, r.string(*gt, where, "stride_identity", "row_major"));
    m.cache_groups.push_back(std::move(g));
  }

  if (Status s = m.validate(); !s.ok()) {
    Error e = s.error();
    e.reason = r.path() + ": " + e.reason;
    return e;
  }
  return m;
}

}  // namespace

Result<CacheLayoutManifest> load_layout_manifest(const std::string& path) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return from_reader(*reader);
}

Result<CacheLayoutManifest> parse_layout_manifest(std::string_view toml_text, const std::string& origin) {
  auto reader = TomlReader::parse(toml_text, origin);
  if (!reader.ok()) return reader.error();
  return from_reader(*reader);
}

}  // namespace kvrt
