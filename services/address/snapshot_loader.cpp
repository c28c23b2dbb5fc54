#include "services/address/snapshot_loader.hpp"

#include <initializer_list>

#include "services/common/toml_reader.hpp"

namespace kvrt {
namespace {

constexpr int64_t kU32Max = UINT32_MAX;

std::string at(const std::string& list, size_t i) { return list + "[" + std::to_string(i) + "]"; }
std::string dotted(const std::string& where, const std::string& field) {
  return where.empty() ? field : where + "." + field;
}

// A misspelt optional key would otherwise be ignored silently.
Status known_keys(const TomlReader& r, const toml::table& t, const std::string& where,
                  std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, node] : t) {
    bool ok = false;
    for (auto a : allowed) ok = ok || key.str() == a;
    if (!ok) return r.field_error(&node, where, std::string(key.str()), "unknown key");
  }
  return Status::success();
}

// The array of tables (or inline tables) under `field`; empty when absent and optional.
Result<const toml::array*> table_array(const TomlReader& r, const toml::table& t, const std::string& where,
                                       const std::string& field, bool required) {
  const toml::node* node = t.get(field);
  if (node == nullptr) {
    if (!required) return static_cast<const toml::array*>(nullptr);
    return r.field_error(&t, where, field, "is required (an array of tables)");
  }
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return r.field_error(node, where, field, "must be an array of tables");
  for (size_t i = 0; i < arr->size(); ++i)
    if (!arr->get(i)->is_table()) return r.field_error(arr->get(i), where, at(field, i), "must be a table");
  return arr;
}

template <class Id>
Result<Id> id_field(const TomlReader& r, const toml::table& t, const std::string& where, const std::string& field,
                    int64_t max = kU32Max) {
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, r.integer(t, where, field, std::nullopt, 0, max));
  return Id{static_cast<typename Id::rep_type>(v)};
}

Result<PoolDescriptor> read_descriptor(const TomlReader& r, const toml::table& t, const std::string& where,
                                       PoolGeneration pool_generation) {
  KVRT_TRY(known_keys(r, t, where, {"id", "slot", "valid_rows", "bundle", "pool_generation"}));
  PoolDescriptor d;
  int64_t v = 0;
  KVRT_TRY_ASSIGN(d.physical_id, id_field<PhysicalBlockId>(r, t, where, "id"));
  KVRT_TRY_ASSIGN(d.slot, id_field<PhysicalSlot>(r, t, where, "slot"));
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "valid_rows", std::nullopt, 0, kU32Max));
  d.valid_rows = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "pool_generation", int64_t{pool_generation.value}, 0, kU32Max));
  d.pool_generation = PoolGeneration{static_cast<uint32_t>(v)};
  if (t.get("bundle") != nullptr) {
    KVRT_TRY_ASSIGN(v, r.integer(t, where, "bundle", std::nullopt, 0));
    d.bundle = static_cast<uint64_t>(v);
  }
  return d;
}

Result<GroupPool> read_pool(const TomlReader& r, const toml::table& t, const std::string& where) {
  KVRT_TRY(known_keys(r, t, where,
                      {"group", "pool_id", "pool_generation", "slot_count", "k_base", "v_base", "descriptors"}));
  GroupPool p;
  int64_t v = 0;
  KVRT_TRY_ASSIGN(p.group, id_field<CacheGroupId>(r, t, where, "group"));
  KVRT_TRY_ASSIGN(p.pool_id, id_field<PoolId>(r, t, where, "pool_id"));
  KVRT_TRY_ASSIGN(p.pool_generation, id_field<PoolGeneration>(r, t, where, "pool_generation"));
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "slot_count", std::nullopt, 1, kU32Max));
  p.slot_count = static_cast<uint32_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "k_base", std::nullopt, 0));
  p.k_base = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "v_base", std::nullopt, 0));
  p.v_base = static_cast<uint64_t>(v);
  const toml::array* descs = nullptr;
  KVRT_TRY_ASSIGN(descs, table_array(r, t, where, "descriptors", false));
  for (size_t i = 0; descs != nullptr && i < descs->size(); ++i) {
    PoolDescriptor d;
    KVRT_TRY_ASSIGN(
        d, read_descriptor(r, *descs->get(i)->as_table(), dotted(where, at("descriptors", i)), p.pool_generation));
    p.descriptors.push_back(d);
  }
  return p;
}

Result<GroupTable> read_table(const TomlReader& r, const toml::table& t, const std::string& where) {
  KVRT_TRY(known_keys(r, t, where, {"group", "pool_id", "pool_generation", "blocks"}));
  GroupTable g;
  KVRT_TRY_ASSIGN(g.group, id_field<CacheGroupId>(r, t, where, "group"));
  KVRT_TRY_ASSIGN(g.pool_id, id_field<PoolId>(r, t, where, "pool_id"));
  KVRT_TRY_ASSIGN(g.pool_generation, id_field<PoolGeneration>(r, t, where, "pool_generation"));
  std::vector<int64_t> blocks;
  KVRT_TRY_ASSIGN(blocks, r.integer_array(t, where, "blocks"));
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] < 0 || blocks[i] > kU32Max)
      return r.field_error(t.get("blocks")->as_array()->get(i), where, at("blocks", i),
                           "physical block id " + std::to_string(blocks[i]) + " is outside [0, 4294967295]");
    g.blocks.push_back(PhysicalBlockId{static_cast<uint32_t>(blocks[i])});
  }
  return g;
}

Result<RequestTables> read_request(const TomlReader& r, const toml::table& t, const std::string& where) {
  KVRT_TRY(known_keys(r, t, where, {"name", "id", "context_length", "table_version", "tables"}));
  RequestTables q;
  int64_t v = 0;
  KVRT_TRY_ASSIGN(q.name, r.string(t, where, "name"));
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "id", std::nullopt, 0));
  q.request_id = RequestId{static_cast<uint64_t>(v)};
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "context_length", std::nullopt, 0));
  q.context_length = static_cast<uint64_t>(v);
  KVRT_TRY_ASSIGN(v, r.integer(t, where, "table_version", std::nullopt, 0));
  q.table_version = TableVersion{static_cast<uint64_t>(v)};
  const toml::array* tables = nullptr;
  KVRT_TRY_ASSIGN(tables, table_array(r, t, where, "tables", true));
  for (size_t i = 0; i < tables->size(); ++i) {
    GroupTable g;
    KVRT_TRY_ASSIGN(g, read_table(r, *tables->get(i)->as_table(), dotted(where, at("tables", i))));
    q.tables.push_back(std::move(g));
  }
  return q;
}

// Points a validate() error at the TOML node its field path names, walking up
// the path ("pools[1].descriptors[2].slot" -> "pools[1].descriptors[2]" ->
// ...) until a node exists.
Error locate(const TomlReader& r, Error e) {
  std::string path = e.field;
  const toml::node* node = nullptr;
  while (!path.empty() && node == nullptr) {
    node = toml::at_path(r.root(), path).node();
    if (node != nullptr) break;
    const size_t cut = path.find_last_of(".[");
    path = cut == std::string::npos ? std::string{} : path.substr(0, cut);
  }
  std::string where = r.path();
  if (node != nullptr) {
    // Appended piecewise: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string&&.
    where.append(":").append(std::to_string(node->source().begin.line));
    where.append(":").append(std::to_string(node->source().begin.column));
  }
  e.reason = where + ": " + e.reason;
  return e;
}

Result<TranslationSnapshot> from_reader(const TomlReader& r, const CacheLayoutManifest& layout) {
  const toml::table& root = r.root();
  KVRT_TRY(known_keys(r, root, "", {"schema_version", "layout_manifest_id", "pools", "requests"}));
  KVRT_TRY(r.integer(root, "", "schema_version", 1, 1, 1));  // only version 1 exists
  std::string manifest_id;
  KVRT_TRY_ASSIGN(manifest_id, r.string(root, "", "layout_manifest_id"));
  // A snapshot's slots and bases mean nothing under another layout.
  if (manifest_id != layout.manifest_id) {
    Error e =
        r.field_error(root.get("layout_manifest_id"), "", "layout_manifest_id",
                      "snapshot was built for layout \"" + manifest_id + "\", not \"" + layout.manifest_id + "\"");
    e.code = ErrorCode::incompatible;
    return e;
  }
  TranslationSnapshot s;
  s.layout = layout;
  const toml::array* pools = nullptr;
  KVRT_TRY_ASSIGN(pools, table_array(r, root, "", "pools", true));
  for (size_t i = 0; i < pools->size(); ++i) {
    GroupPool p;
    KVRT_TRY_ASSIGN(p, read_pool(r, *pools->get(i)->as_table(), at("pools", i)));
    s.pools.push_back(std::move(p));
  }
  const toml::array* requests = nullptr;
  KVRT_TRY_ASSIGN(requests, table_array(r, root, "", "requests", false));
  for (size_t i = 0; requests != nullptr && i < requests->size(); ++i) {
    RequestTables q;
    KVRT_TRY_ASSIGN(q, read_request(r, *requests->get(i)->as_table(), at("requests", i)));
    s.requests.push_back(std::move(q));
  }
  if (Status st = s.validate(); !st.ok()) return locate(r, st.error());
  return s;
}

}  // namespace

Result<TranslationSnapshot> load_translation_snapshot(const std::string& path, const CacheLayoutManifest& layout) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return from_reader(*reader, layout);
}

Result<TranslationSnapshot> parse_translation_snapshot(std::string_view toml_text, const std::string& origin,
                                                       const CacheLayoutManifest& layout) {
  auto reader = TomlReader::parse(toml_text, origin);
  if (!reader.ok()) return reader.error();
  return from_reader(*reader, layout);
}

}  // namespace kvrt
