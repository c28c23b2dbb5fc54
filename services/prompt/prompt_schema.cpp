#include "services/prompt/prompt_schema.hpp"

#include <algorithm>
#include <set>

#include "services/common/toml_reader.hpp"

namespace kvrt {

const DeclaredModule* PromptSchema::find(std::string_view module_id) const {
  for (const DeclaredModule& m : modules)
    if (m.id == module_id) return &m;
  return nullptr;
}

Status PromptSchema::validate() const {
  auto bad = [](const std::string& why, const std::string& field) {
    return make_error(ErrorCode::invalid_argument, why, field);
  };
  if (schema_id.empty()) return bad("a schema needs an id", "schema_id");
  if (generation == 0) return bad("generation starts at 1", "generation");
  std::set<std::string> ids;
  for (size_t i = 0; i < modules.size(); ++i) {
    const DeclaredModule& m = modules[i];
    const std::string where = "module[" + std::to_string(i) + "]";
    if (m.id.empty() || !ids.insert(m.id).second) return bad("module ids are non-empty and unique", where + ".id");
    if (m.position_begin >= m.position_end)
      return bad("module \"" + m.id + "\" declares an empty position range", where + ".positions");
    if (i > 0 && modules[i - 1].position_end > m.position_begin)
      return bad("modules \"" + modules[i - 1].id + "\" and \"" + m.id + "\" declare overlapping positions",
                 where + ".positions");
    std::set<std::string> names(m.parameters.begin(), m.parameters.end());
    if (names.size() != m.parameters.size() || names.contains(""))
      return bad("module \"" + m.id + "\" declares a parameter twice or an empty one", where + ".parameters");
  }
  return Status::success();
}

Result<PromptSchema> parse_prompt_schema(std::string_view text, const std::string& origin) {
  Result<TomlReader> reader = TomlReader::parse(text, origin);
  if (!reader.ok()) return reader.error();
  const toml::table& root = reader->root();
  for (const auto& [key, node] : root)
    if (key != "schema_id" && key != "generation" && key != "module")
      return reader->field_error(&node, "", std::string(key.str()), "is not a prompt schema key");
  PromptSchema s;
  KVRT_TRY_ASSIGN(s.schema_id, reader->string(root, "", "schema_id"));
  int64_t generation = 0;
  KVRT_TRY_ASSIGN(generation, reader->integer(root, "", "generation", std::nullopt, 1));
  s.generation = static_cast<uint64_t>(generation);
  if (const toml::array* modules = root.get_as<toml::array>("module")) {
    for (size_t i = 0; i < modules->size(); ++i) {
      const std::string where = "module[" + std::to_string(i) + "]";
      const toml::table* t = modules->get(i)->as_table();
      if (t == nullptr) return reader->field_error(modules->get(i), "", where, "must be a table ([[module]])");
      for (const auto& [key, node] : *t)
        if (key != "id" && key != "positions" && key != "parameters")
          return reader->field_error(&node, where, std::string(key.str()), "is not a module key");
      DeclaredModule m;
      KVRT_TRY_ASSIGN(m.id, reader->string(*t, where, "id"));
      std::vector<int64_t> range;
      KVRT_TRY_ASSIGN(range, reader->integer_array(*t, where, "positions"));
      if (range.size() != 2 || range[0] < 0 || range[1] > int64_t{UINT32_MAX} || range[0] >= range[1])
        return reader->field_error(t->get("positions"), where, "positions",
                                   "must be [begin, end) with 0 <= begin < end < 2^32");
      m.position_begin = static_cast<uint32_t>(range[0]);
      m.position_end = static_cast<uint32_t>(range[1]);
      if (t->contains("parameters")) KVRT_TRY_ASSIGN(m.parameters, reader->string_array(*t, where, "parameters"));
      s.modules.push_back(std::move(m));
    }
  }
  std::stable_sort(s.modules.begin(), s.modules.end(), [](const DeclaredModule& a, const DeclaredModule& b) {
    return a.position_begin < b.position_begin;
  });
  KVRT_TRY(s.validate());
  return s;
}

}  // namespace kvrt
