#include "shm/pool_capacity_config.hpp"

namespace kvrt::shm {

Result<PoolCapacity> read_pool_capacity(const TomlReader& reader, const toml::table& table, const std::string& where) {
  const bool has_blocks = table.contains("capacity_blocks");
  const bool has_bytes = table.contains("capacity_bytes");
  if (has_blocks == has_bytes)
    return reader.field_error(&table, where, has_blocks ? "capacity_bytes" : "capacity_blocks",
                              has_blocks ? "conflicts with capacity_blocks: give exactly one pool size"
                                         : "is required, or capacity_blocks: give exactly one pool size");
  // TOML integers are signed 64-bit, so INT64_MAX bounds both forms; the
  // block form is further bounded by the 32-bit slot index in capacity_in_blocks.
  const std::string field = has_blocks ? "capacity_blocks" : "capacity_bytes";
  int64_t amount = 0;
  KVRT_TRY_ASSIGN(amount, reader.integer(table, where, field, std::nullopt, 1, INT64_MAX));
  return has_blocks ? PoolCapacity::blocks(static_cast<uint64_t>(amount))
                    : PoolCapacity::bytes(static_cast<uint64_t>(amount));
}

}  // namespace kvrt::shm
