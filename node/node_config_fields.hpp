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
// How workers reach shared-memory pools: "named" or "unnamed".
Result<PoolSegments> read_pool_segments(const TomlReader& reader, const toml::table& table, const std::string& where,
                                        const std::string& field);
// The prefix reuse policy (0x07D): "full_block" or "immutable_partial_tail".
Result<ReusePolicy> read_reuse_policy(const TomlReader& reader, const toml::table& table, const std::string& where,
                                      const std::string& field);

}  // namespace kvrt
