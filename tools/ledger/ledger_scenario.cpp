#include "tools/ledger/ledger_scenario.hpp"

#include <limits>

#include "services/common/toml_reader.hpp"

namespace kvrt {
namespace {

// A positive-integer array whose elements are checked in place, so an error
// points at the offending element's line and column.
Result<std::vector<uint64_t>> positive_array(const TomlReader& r, const toml::table& t, const std::string& field) {
  std::vector<int64_t> raw;
  KVRT_TRY_ASSIGN(raw, r.integer_array(t, "", field));
  if (raw.empty()) return r.field_error(t.get(field), "", field, "must list at least one value");
  const toml::array& arr = *t.get(field)->as_array();
  std::vector<uint64_t> out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 1)
      return r.field_error(arr.get(i), "", field + "[" + std::to_string(i) + "]",
                           "value " + std::to_string(raw[i]) + " must be at least 1");
    out.push_back(static_cast<uint64_t>(raw[i]));
  }
  return out;
}

Result<uint64_t> non_negative(const TomlReader& r, const toml::table& t, const std::string& where,
                              const std::string& field, int64_t min = 0) {
  int64_t v = 0;
  KVRT_TRY_ASSIGN(v, r.integer(t, where, field, std::nullopt, min));
  return static_cast<uint64_t>(v);
}

Result<MetadataRecordSizes> read_record_sizes(const TomlReader& r) {
  const toml::table* t = r.root().get_as<toml::table>("metadata");
  if (t == nullptr) return r.field_error(&r.root(), "", "metadata", "is required (a table of record sizes in bytes)");
  MetadataRecordSizes s;
  KVRT_TRY_ASSIGN(s.request_map_entry, non_negative(r, *t, "metadata", "request_map_entry"));
  KVRT_TRY_ASSIGN(s.block_descriptor, non_negative(r, *t, "metadata", "block_descriptor"));
  KVRT_TRY_ASSIGN(s.cached_hash_entry, non_negative(r, *t, "metadata", "cached_hash_entry"));
  KVRT_TRY_ASSIGN(s.valid_tail_record, non_negative(r, *t, "metadata", "valid_tail_record"));
  KVRT_TRY_ASSIGN(s.free_queue_entry, non_negative(r, *t, "metadata", "free_queue_entry"));
  KVRT_TRY_ASSIGN(s.fixed, non_negative(r, *t, "metadata", "fixed"));
  const Status bounded = validate_record_sizes(s);
  if (!bounded.ok()) {
    const std::string key = bounded.error().field.substr(std::string("metadata.").size());
    return r.field_error(t->get(key), "metadata", key, bounded.error().reason);
  }
  return s;
}

Result<ArenaScenario> read_arena(const TomlReader& r) {
  const toml::table* t = r.root().get_as<toml::table>("arena");
  if (t == nullptr) return r.field_error(&r.root(), "", "arena", "is required (the 0x02F arena snapshot)");
  ArenaScenario a;
  KVRT_TRY_ASSIGN(a.arena_bytes, non_negative(r, *t, "arena", "bytes", 1));
  KVRT_TRY_ASSIGN(a.candidate_bytes, non_negative(r, *t, "arena", "candidate_bytes", 1));
  const toml::node* node = t->get("allocated");
  const toml::array* arr = node != nullptr ? node->as_array() : nullptr;
  if (node != nullptr && (arr == nullptr || !arr->is_array_of_tables()))
    return r.field_error(node, "arena", "allocated", "must be an array of tables ([[arena.allocated]])");
  for (size_t i = 0; arr != nullptr && i < arr->size(); ++i) {
    const toml::table& e = *arr->get(i)->as_table();
    const std::string where = "arena.allocated[" + std::to_string(i) + "]";
    Extent x;
    KVRT_TRY_ASSIGN(x.offset, non_negative(r, e, where, "offset"));
    KVRT_TRY_ASSIGN(x.bytes, non_negative(r, e, where, "bytes", 1));
    a.allocated.push_back(x);
  }
  // Geometry (inside the arena, disjoint) is checked here so the error points at the file.
  auto arena = ContiguousArena::create(a.arena_bytes, a.allocated);
  if (!arena.ok()) {
    const std::string& f = arena.error().field;  // "allocated[i]" or "arena_bytes"
    const toml::node* at = t;
    if (f.rfind("allocated[", 0) == 0) at = arr->get(std::stoul(f.substr(10)));
    return r.field_error(at, "arena", f, arena.error().reason);
  }
  return a;
}

Result<LedgerScenario> read_scenario(const TomlReader& reader) {
  const toml::table& root = reader.root();
  LedgerScenario s;
  s.origin = reader.path();
  KVRT_TRY_ASSIGN(s.layout, reader.string(root, "", "layout"));
  KVRT_TRY_ASSIGN(s.lengths, positive_array(reader, root, "lengths"));
  KVRT_TRY_ASSIGN(s.reserved_rows, positive_array(reader, root, "reserved_rows"));
  const toml::array& reserved = *root.get("reserved_rows")->as_array();
  if (s.reserved_rows.size() != s.lengths.size())
    return reader.field_error(&reserved, "", "reserved_rows",
                              "has " + std::to_string(s.reserved_rows.size()) + " entries for " +
                                  std::to_string(s.lengths.size()) + " lengths");
  for (size_t i = 0; i < s.lengths.size(); ++i)
    if (s.reserved_rows[i] < s.lengths[i])
      return reader.field_error(reserved.get(i), "", "reserved_rows[" + std::to_string(i) + "]",
                                std::to_string(s.reserved_rows[i]) + " reserved rows < length " +
                                    std::to_string(s.lengths[i]) + " (T_max,r >= T_r)");
  // The ledger tallies every block a request holds, so its time is linear
  // in the rows: a scenario of worked numbers stays far below this bound,
  // and an input above it (1.3 x 10^7 rows took 22 s under the sanitizers)
  // is refused rather than read as a hang.
  uint64_t total_reserved = 0;
  for (size_t i = 0; i < s.reserved_rows.size(); ++i) {
    total_reserved += s.reserved_rows[i];
    if (total_reserved > kMaxScenarioRows)
      return reader.field_error(reserved.get(i), "", "reserved_rows[" + std::to_string(i) + "]",
                                "the scenario reserves more than " + std::to_string(kMaxScenarioRows) +
                                    " rows in all (the ledger tallies every block)");
  }
  KVRT_TRY_ASSIGN(s.shared_prefix, reader.boolean(root, "", "shared_prefix"));
  int64_t first = 0;
  KVRT_TRY_ASSIGN(first, reader.integer(root, "", "first_block_id", 100, 0, std::numeric_limits<uint32_t>::max()));
  s.first_block_id = static_cast<uint32_t>(first);
  KVRT_TRY_ASSIGN(s.pool_blocks, non_negative(reader, root, "", "pool_blocks"));
  KVRT_TRY_ASSIGN(s.record_sizes, read_record_sizes(reader));
  KVRT_TRY_ASSIGN(s.arena, read_arena(reader));
  return s;
}

}  // namespace

Result<LedgerScenario> parse_ledger_scenario(std::string_view text, const std::string& origin) {
  auto reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  return read_scenario(*reader);
}

Result<LedgerScenario> load_ledger_scenario(const std::string& path) {
  auto reader = TomlReader::open(path);
  if (!reader.ok()) return reader.error();
  return read_scenario(*reader);
}

Result<LedgerInput> build_ledger_input(const LedgerScenario& scenario, uint32_t block_rows) {
  RequestFamilySpec spec;
  spec.lengths = scenario.lengths;
  spec.reserved_rows = scenario.reserved_rows;
  spec.block_rows = block_rows;
  spec.first_block_id = scenario.first_block_id;
  spec.sharing = scenario.shared_prefix ? PrefixSharing::nested_shared_prefix : PrefixSharing::private_blocks;
  LedgerInput input;
  KVRT_TRY_ASSIGN(input.requests, build_request_family(spec));
  input.pool_blocks = scenario.pool_blocks;
  input.record_sizes = scenario.record_sizes;
  return input;
}

}  // namespace kvrt
