#pragma once
// Pool capacity as configured, in bytes or in blocks. A table holds exactly
// one of
//
//   capacity_blocks = 4096          # [blocks per cache-group pool]
//   capacity_bytes  = 4294967296    # [bytes] budget for whole bundles, all groups
//
// so a config never states two sizes that could disagree. The byte form is
// converted with capacity_in_blocks() (pool_geometry.hpp). Like toml_reader.hpp,
// include this only from .cpp files (toml++ is a heavy header).
#include <toml++/toml.h>

#include <string>

#include "services/common/toml_reader.hpp"
#include "shm/pool_geometry.hpp"

namespace kvrt::shm {

// Errors: config_field (file:line, naming the field) when both or neither key
// is present, or a value is not a positive integer.
Result<PoolCapacity> read_pool_capacity(const TomlReader& reader, const toml::table& table, const std::string& where);

}  // namespace kvrt::shm
