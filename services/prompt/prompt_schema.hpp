#pragma once
// A prompt schema of Prompt Cache (spec 0x0CB): the modules a family of
// prompts is assembled from, each with its declared position range. A module
// rendered with n tokens occupies positions [begin, begin + n) of its range
// in every prompt that uses it; the rest of the range, and the positions no
// module declares, are gaps where parameters and free text go. Position ids
// of an assembled prompt may therefore be discontinuous, and a module's K/V
// is reusable only at the positions it was computed at.
//
//   schema_id = "support-bot"
//   generation = 1                  # advance whenever a module moves or changes
//   [[module]]
//   id = "system"
//   positions = [0, 128]            # [begin, end)
//   [[module]]
//   id = "document"
//   positions = [200, 712]
//   parameters = ["doc_id"]         # the values it may be rendered with
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

struct DeclaredModule {
  std::string id;
  uint32_t position_begin = 0;  // [positions]
  uint32_t position_end = 0;    // one past the last declared position
  std::vector<std::string> parameters;
  friend bool operator==(const DeclaredModule&, const DeclaredModule&) = default;
};

struct PromptSchema {
  std::string schema_id;
  uint64_t generation = 0;
  std::vector<DeclaredModule> modules;  // by position_begin

  const DeclaredModule* find(std::string_view module_id) const;
  // Module ids unique and non-empty, ranges non-empty and disjoint, parameter
  // names unique per module, a generation > 0. Errors name the field.
  Status validate() const;
  friend bool operator==(const PromptSchema&, const PromptSchema&) = default;
};

// Errors: config_parse (file:line:col), config_field naming the field, and
// validate()'s.
Result<PromptSchema> parse_prompt_schema(std::string_view toml_text, const std::string& origin);

}  // namespace kvrt
