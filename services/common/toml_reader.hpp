#pragma once
// Reads TOML configuration with errors that name the file, line, column and
// field, so a bad config file is fixed in one look and starts nothing.
// Include only from .cpp files: toml++ is a heavy header.
#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

class TomlReader {
 public:
  // Parses a file; a syntax error becomes ErrorCode::config_parse with file:line:col.
  static Result<TomlReader> open(const std::string& path);
  // Parses text already in memory; `origin` names it in errors.
  static Result<TomlReader> parse(std::string_view text, const std::string& origin);

  const toml::table& root() const { return table_; }
  const std::string& path() const { return path_; }

  // Typed field access relative to a table. `field` is the key inside `table`;
  // `where` is the dotted path of that table for messages ("" for the root).
  Result<int64_t> integer(const toml::table& table, const std::string& where, const std::string& field,
                          std::optional<int64_t> fallback = std::nullopt, int64_t min = INT64_MIN,
                          int64_t max = INT64_MAX) const;
  Result<std::string> string(const toml::table& table, const std::string& where, const std::string& field,
                             std::optional<std::string> fallback = std::nullopt) const;
  Result<bool> boolean(const toml::table& table, const std::string& where, const std::string& field,
                       std::optional<bool> fallback = std::nullopt) const;
  Result<std::vector<int64_t>> integer_array(const toml::table& table, const std::string& where,
                                             const std::string& field,
                                             std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  Result<std::vector<std::string>> string_array(const toml::table& table, const std::string& where,
                                                const std::string& field) const;
  // A string field that names one of `choices`, returned as its enum value so
  // nothing downstream compares configuration strings (docs/conventions.md). The error
  // lists every accepted name.
  template <typename Enum>
  Result<Enum> choice(const toml::table& table, const std::string& where, const std::string& field,
                      std::string_view fallback,
                      std::initializer_list<std::pair<std::string_view, Enum>> choices) const {
    Result<std::string> name = string(table, where, field, std::string(fallback));
    if (!name.ok()) return name.error();
    std::string accepted;
    for (const auto& [choice_name, value] : choices) {
      if (choice_name == name.value()) return value;
      accepted += (accepted.empty() ? "\"" : ", \"") + std::string(choice_name) + "\"";
    }
    return field_error(table.get(field), where, field, "must be one of " + accepted + ", not \"" + name.value() + "\"");
  }
  // Error for a field whose value is present but not acceptable.
  Error field_error(const toml::node* node, const std::string& where, const std::string& field,
                    const std::string& reason) const;

 private:
  TomlReader(toml::table table, std::string path) : table_(std::move(table)), path_(std::move(path)) {}
  std::string locate(const toml::node* node) const;
  toml::table table_;
  std::string path_;
};

}  // namespace kvrt
