#include "services/common/toml_reader.hpp"

#include <fstream>
#include <sstream>

namespace kvrt {
namespace {
std::string dotted(const std::string& where, const std::string& field) {
  return where.empty() ? field : where + "." + field;
}
}  // namespace

Result<TomlReader> TomlReader::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, "cannot open config file " + path, path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Result<TomlReader> TomlReader::parse(std::string_view text, const std::string& origin) {
  try {
    toml::table t = toml::parse(text, origin);
    return TomlReader(std::move(t), origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return make_error(
        ErrorCode::config_parse,
        origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " + std::string(e.description()),
        origin);
  }
}

std::string TomlReader::locate(const toml::node* node) const {
  if (node == nullptr) return path_;
  const auto& b = node->source().begin;
  return path_ + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

Error TomlReader::field_error(const toml::node* node, const std::string& where, const std::string& field,
                              const std::string& reason) const {
  const std::string name = dotted(where, field);
  return make_error(ErrorCode::config_field, locate(node) + ": field '" + name + "': " + reason, name);
}

Result<int64_t> TomlReader::integer(const toml::table& table, const std::string& where, const std::string& field,
                                    std::optional<int64_t> fallback, int64_t min, int64_t max) const {
  const toml::node* node = table.get(field);
  if (node == nullptr) {
    if (fallback) return *fallback;
    return field_error(&table, where, field, "is required (an integer)");
  }
  // The type first: value<int64_t>() converts a float too, and one outside
  // int64's range (1e300) is undefined behaviour.
  if (!node->is_integer()) return field_error(node, where, field, "must be an integer");
  const std::optional<int64_t> v = node->value<int64_t>();
  if (!v) return field_error(node, where, field, "must be an integer");
  if (*v < min || *v > max)
    return field_error(
        node, where, field,
        "value " + std::to_string(*v) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return *v;
}

Result<std::string> TomlReader::string(const toml::table& table, const std::string& where, const std::string& field,
                                       std::optional<std::string> fallback) const {
  const toml::node* node = table.get(field);
  if (node == nullptr) {
    if (fallback) return *fallback;
    return field_error(&table, where, field, "is required (a string)");
  }
  if (!node->is_string()) return field_error(node, where, field, "must be a string");
  return std::string(*node->value<std::string_view>());
}

Result<bool> TomlReader::boolean(const toml::table& table, const std::string& where, const std::string& field,
                                 std::optional<bool> fallback) const {
  const toml::node* node = table.get(field);
  if (node == nullptr) {
    if (fallback) return *fallback;
    return field_error(&table, where, field, "is required (true or false)");
  }
  if (!node->is_boolean()) return field_error(node, where, field, "must be true or false");
  return *node->value<bool>();
}

Result<std::vector<int64_t>> TomlReader::integer_array(const toml::table& table, const std::string& where,
                                                       const std::string& field,
                                                       std::optional<std::vector<int64_t>> fallback) const {
  const toml::node* node = table.get(field);
  if (node == nullptr) {
    if (fallback) return *fallback;
    return field_error(&table, where, field, "is required (an array of integers)");
  }
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return field_error(node, where, field, "must be an array of integers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    if (!e.is_integer()) return field_error(&e, where, field + "[" + std::to_string(i) + "]", "must be an integer");
    out.push_back(*e.value<int64_t>());
  }
  return out;
}

Result<std::vector<std::string>> TomlReader::string_array(const toml::table& table, const std::string& where,
                                                          const std::string& field) const {
  const toml::node* node = table.get(field);
  if (node == nullptr) return field_error(&table, where, field, "is required (an array of strings)");
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return field_error(node, where, field, "must be an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    if (!e.is_string()) return field_error(&e, where, field + "[" + std::to_string(i) + "]", "must be a string");
    out.emplace_back(*e.value<std::string_view>());
  }
  return out;
}

}  // namespace kvrt
