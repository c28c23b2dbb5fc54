#include "services/executor/block_table.hpp"

#include "services/common/units.hpp"

namespace kvrt::executor {

Result<ResolvedBlockTable> resolve_block_table(const TranslationSnapshot& snapshot, std::string_view request,
                                               CacheGroupId group, std::optional<TableVersion> expected_version) {
  const RequestTables* tables = snapshot.current(request);
  if (tables == nullptr)
    return make_error(ErrorCode::unknown_request, "no published request named " + std::string(request), "request");
  if (expected_version && *expected_version != tables->table_version)
    return make_error(ErrorCode::stale_table_version,
                      "planned against table version " + std::to_string(expected_version->value) +
                          " but the current version is " + std::to_string(tables->table_version.value),
                      "expected_table_version");
  const GroupTable* table = tables->table(group);
  const GroupPool* pool = snapshot.pool(group);
  if (table == nullptr || pool == nullptr)
    return make_error(ErrorCode::unknown_group,
                      "request has no table or pool for cache group " + std::to_string(group.value), "group");
  const uint32_t block_tokens = snapshot.block_size();
  const uint64_t needed = ceil_div(tables->context_length, block_tokens);
  if (needed > table->blocks.size())
    return make_error(ErrorCode::table_out_of_bounds,
                      "context of " + std::to_string(tables->context_length) + " tokens needs " +
                          std::to_string(needed) + " blocks but the table has " + std::to_string(table->blocks.size()),
                      "tables.blocks");
  ResolvedBlockTable out;
  out.request_id = tables->request_id;
  out.table_version = tables->table_version;
  out.group = group;
  out.context_tokens = tables->context_length;
  out.slots.reserve(needed);
  out.valid_rows.reserve(needed);
  // The table's scope (pool id, generation) must be the pool's current one:
  // a table published before its pool was recycled names a dead generation.
  if (table->pool_id != pool->pool_id)
    return make_error(
        ErrorCode::unknown_physical,
        "table names pool " + std::to_string(table->pool_id.value) + ", not " + std::to_string(pool->pool_id.value),
        "tables.pool_id");
  if (table->pool_generation != pool->pool_generation)
    return make_error(ErrorCode::stale_physical,
                      "table names pool generation " + std::to_string(table->pool_generation.value) + ", current is " +
                          std::to_string(pool->pool_generation.value),
                      "tables.pool_generation");
  for (uint64_t j = 0; j < needed; ++j) {
    const auto field = [j] { return std::string("tables.blocks[").append(std::to_string(j)).append("]"); };
    const PoolDescriptor* d = pool->descriptor(table->blocks[j]);
    if (d == nullptr)
      return make_error(ErrorCode::unknown_physical,
                        "physical block " + std::to_string(table->blocks[j].value) + " has no descriptor", field());
    if (d->pool_generation != pool->pool_generation)
      return make_error(ErrorCode::stale_physical,
                        "descriptor of block " + std::to_string(table->blocks[j].value) + " is of generation " +
                            std::to_string(d->pool_generation.value),
                        field());
    out.slots.push_back(d->slot.value);
    out.valid_rows.push_back(d->valid_rows);
  }
  return out;
}

Result<uint32_t> kernel_block_tokens_for(const PagedKvView& view, uint32_t requested) {
  const uint32_t p_k = requested == 0 ? view.block_tokens : requested;
  if (view.block_tokens % p_k != 0)
    return make_error(ErrorCode::kernel_block_not_divisor,
                      "kernel block of " + std::to_string(p_k) + " tokens does not divide the allocator block of " +
                          std::to_string(view.block_tokens) + " (0x0AC: P_a = q * P_k)",
                      "kernel_block_tokens");
  return p_k;
}

Status check_block_table(const KvBlockTable& t, const PagedKvView& view, uint32_t kernel_block_tokens,
                         const std::string& field) {
  KVRT_TRY(kernel_block_tokens_for(view, kernel_block_tokens));
  if (t.context_tokens == 0)
    return make_error(ErrorCode::executor_frontier_mismatch, "a request with no visible token has nothing to attend",
                      field + ".context_tokens");
  if (t.slots.size() != t.valid_rows.size())
    return make_error(
        ErrorCode::executor_shape_mismatch,
        std::to_string(t.slots.size()) + " slots but " + std::to_string(t.valid_rows.size()) + " valid-row entries",
        field + ".valid_rows");
  const uint32_t p_a = view.block_tokens;
  const uint64_t needed = ceil_div(t.context_tokens, p_a);
  if (needed > t.slots.size())
    return make_error(ErrorCode::table_out_of_bounds,
                      "context of " + std::to_string(t.context_tokens) + " tokens needs " + std::to_string(needed) +
                          " blocks of " + std::to_string(p_a) + " but the table has " + std::to_string(t.slots.size()),
                      field + ".slots");
  // Field names are built only on the error path: this loop runs once per
  // table entry on every kernel call.
  const auto at = [&](const char* member, uint64_t a) {
    std::string f = field;
    f.append(member).append("[").append(std::to_string(a)).append("]");
    return f;
  };
  for (uint64_t a = 0; a < needed; ++a) {
    if (t.slots[a] >= view.slot_count)
      return make_error(ErrorCode::coordinate_out_of_range,
                        "slot " + std::to_string(t.slots[a]) + " >= pool of " + std::to_string(view.slot_count),
                        at(".slots", a));
    if (t.valid_rows[a] > p_a)
      return make_error(ErrorCode::coordinate_out_of_range,
                        std::to_string(t.valid_rows[a]) + " valid rows in a block of " + std::to_string(p_a),
                        at(".valid_rows", a));
    // Request visibility precedes physical validity (0x03G): the request may
    // see fewer rows than are committed, never more.
    const uint64_t visible = std::min<uint64_t>(p_a, t.context_tokens - a * p_a);
    if (visible > t.valid_rows[a])
      return make_error(ErrorCode::row_not_valid,
                        "the request sees " + std::to_string(visible) + " rows of block " + std::to_string(a) +
                            " but only " + std::to_string(t.valid_rows[a]) +
                            " are committed: the read would consume padding rows",
                        at(".valid_rows", a));
  }
  return Status::success();
}

}  // namespace kvrt::executor
