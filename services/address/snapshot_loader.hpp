#pragma once
// Loads a TranslationSnapshot (pools, descriptors, request tables) from TOML,
// e.g. config/snapshots/loop4-fixture.toml, against an already loaded layout
// manifest, and validates it. Field errors name file:line:column and the
// dotted field; a structural rejection from TranslationSnapshot::validate()
// keeps its own code (overlapping_tensors, slot_reuse, ...) and is located
// at the line of the field it names.
#include <string>
#include <string_view>

#include "services/address/translation_snapshot.hpp"
#include "services/common/result.hpp"

namespace kvrt {

Result<TranslationSnapshot> load_translation_snapshot(const std::string& path, const CacheLayoutManifest& layout);
Result<TranslationSnapshot> parse_translation_snapshot(std::string_view toml_text, const std::string& origin,
                                                       const CacheLayoutManifest& layout);

}  // namespace kvrt
