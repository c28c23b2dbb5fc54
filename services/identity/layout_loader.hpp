#pragma once
// Loads a CacheLayoutManifest from a TOML file (config/layouts/*.toml) and
// validates it. Every error names the file, line and field.
#include <string>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

Result<CacheLayoutManifest> load_layout_manifest(const std::string& path);
Result<CacheLayoutManifest> parse_layout_manifest(std::string_view toml_text, const std::string& origin);

}  // namespace kvrt
