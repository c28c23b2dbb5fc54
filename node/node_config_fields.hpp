#pragma once
// Readers for the [node] choices that another config file also sets (the
// run config names the node's scheduler and prefix index), so both files
// accept the same names with the same error. Include only from .cpp files:
// it pulls in toml++ (services/common/toml_reader.hpp).
#include <string>

#include "node/node_config.hpp"
#include "services/common/toml_reader.hpp"

namespace kvrt {

Result<NodeScheduler> read_node_scheduler(const TomlReader& reader, const toml::table& table, const std::string& where,
                                          const std::string& field);
Result<PrefixIndexKind> read_prefix_index_kind(const TomlReader& reader, const toml::table& table,
                                               const std::string& where, const std::string& field);
// The reuse policy under the prefix index `index` (partial tails need the
// hash chain: a typed error on the field otherwise).
Result<ReusePolicy> read_reuse_policy(const TomlReader& reader, const toml::table& table, const std::string& where,
                                      const std::string& field, PrefixIndexKind index);

}  // namespace kvrt
