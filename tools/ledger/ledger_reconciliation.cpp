#include "tools/ledger/ledger_reconciliation.hpp"

#include <string>

namespace kvrt {
namespace {

Error broken(LedgerIdentity identity, std::string reason) {
  return make_error(ErrorCode::ledger_identity_broken, std::move(reason), std::string(to_string(identity)));
}

// total == first + second, computed without wrap-around.
Status additive(LedgerIdentity identity, int64_t total, int64_t first, int64_t second, const char* unit) {
  if (static_cast<__int128>(total) == static_cast<__int128>(first) + second) return Status::success();
  return broken(identity,
                std::to_string(total) + " != " + std::to_string(first) + " + " + std::to_string(second) + " " + unit);
}

Status additive_rows(LedgerIdentity identity, uint64_t total, uint64_t first, int64_t second) {
  // Row counts are bounded far below 2^63 by the ledger's input bounds.
  return additive(identity, static_cast<int64_t>(total), static_cast<int64_t>(first), second, "rows");
}

Status product(LedgerIdentity identity, const char* what, uint64_t value, uint64_t count, uint64_t unit) {
  if (static_cast<unsigned __int128>(count) * unit == value) return Status::success();
  return broken(identity, std::string(what) + " " + std::to_string(value) + " != " + std::to_string(count) + " * " +
                              std::to_string(unit));
}

Status check_rows(const RowLedger& row) {
  constexpr auto id = LedgerIdentity::row_is_sum_of_groups;
  uint64_t sum = 0;
  for (const GroupRowLedger& g : row.groups) {
    KVRT_TRY(additive(id, static_cast<int64_t>(g.row_bytes), static_cast<int64_t>(g.k_row_bytes),
                      static_cast<int64_t>(g.v_row_bytes), "bytes (group K + V)"));
    KVRT_TRY(product(id, "group K row bytes", g.k_row_bytes, uint64_t{g.layers} * g.kv_heads_local * g.head_dim,
                     g.k_scalar_bytes));
    KVRT_TRY(product(id, "group V row bytes", g.v_row_bytes, uint64_t{g.layers} * g.kv_heads_local * g.head_dim,
                     g.v_scalar_bytes));
    KVRT_TRY(product(id, "group block bytes", g.block_bytes, g.row_bytes, row.block_rows));
    sum += g.row_bytes;
  }
  if (sum != row.row_bytes)
    return broken(id, "B_row,rank " + std::to_string(row.row_bytes) + " != sum of groups " + std::to_string(sum));
  return product(id, "block bytes", row.block_bytes, row.row_bytes, row.block_rows);
}

}  // namespace

std::string_view to_string(LedgerIdentity identity) {
  switch (identity) {
    case LedgerIdentity::row_is_sum_of_groups:
      return "row = sum of group rows";
    case LedgerIdentity::reserved_is_logical_plus_slack:
      return "reserved = logical + slack";
    case LedgerIdentity::request_view_is_logical_plus_tail:
      return "request-view capacity = logical + request-view tail";
    case LedgerIdentity::unique_capacity_is_materialized_plus_tail:
      return "unique capacity = unique materialized + unique tail";
    case LedgerIdentity::request_view_is_unique_capacity_plus_avoided:
      return "request-view capacity = unique capacity + capacity avoided";
    case LedgerIdentity::logical_is_materialized_plus_deduplicated:
      return "logical = unique materialized + deduplicated";
    case LedgerIdentity::pool_is_live_plus_idle:
      return "pool = live + idle";
    case LedgerIdentity::live_is_unique:
      return "live pool blocks = unique blocks";
    case LedgerIdentity::slots_are_blocks_times_block_rows:
      return "slots = blocks * P";
    case LedgerIdentity::bytes_are_rows_times_row_bytes:
      return "bytes = rows * B_row";
    case LedgerIdentity::metadata_is_sum_of_records:
      return "metadata = sum of record families";
  }
  return "unknown_identity";
}

std::vector<IdentityCheck> additive_identities(const ByteLedgers& l) {
  auto s = [](uint64_t v) { return static_cast<int64_t>(v); };
  return {
      {LedgerIdentity::reserved_is_logical_plus_slack, s(l.rectangular.reserved_bytes), s(l.rectangular.logical_bytes),
       s(l.rectangular.slack_bytes)},
      {LedgerIdentity::request_view_is_logical_plus_tail, s(l.request_view.capacity_bytes),
       s(l.request_view.logical_bytes), s(l.request_view.tail_bytes)},
      {LedgerIdentity::unique_capacity_is_materialized_plus_tail, s(l.unique.capacity_bytes),
       s(l.unique.materialized_bytes), s(l.unique.tail_bytes)},
      {LedgerIdentity::request_view_is_unique_capacity_plus_avoided, s(l.request_view.capacity_bytes),
       s(l.unique.capacity_bytes), s(l.savings.avoided_bytes)},
      {LedgerIdentity::logical_is_materialized_plus_deduplicated, s(l.rectangular.logical_bytes),
       s(l.unique.materialized_bytes), l.savings.deduplicated_bytes},
      {LedgerIdentity::pool_is_live_plus_idle, s(l.pool.provisioned_bytes), s(l.pool.live_bytes), s(l.pool.idle_bytes)},
  };
}

Status reconcile_ledgers(const ByteLedgers& l) {
  const uint64_t P = l.row.block_rows;
  const uint64_t B = l.row.row_bytes;
  KVRT_TRY(check_rows(l.row));

  // The 0x0D identities in rows (blocks for the pool) ...
  const auto& rect = l.rectangular;
  const auto& view = l.request_view;
  const auto& uniq = l.unique;
  const auto& save = l.savings;
  const auto& pool = l.pool;
  KVRT_TRY(additive_rows(LedgerIdentity::reserved_is_logical_plus_slack, rect.reserved_rows, rect.logical_rows,
                         static_cast<int64_t>(rect.slack_rows)));
  KVRT_TRY(additive_rows(LedgerIdentity::request_view_is_logical_plus_tail, view.slot_rows, view.logical_rows,
                         static_cast<int64_t>(view.tail_rows)));
  // The request view sees exactly the committed rows: sum over references of
  // visible rows == sum_r T_r.
  KVRT_TRY(additive_rows(LedgerIdentity::request_view_is_logical_plus_tail, view.logical_rows, rect.logical_rows, 0));
  KVRT_TRY(additive_rows(LedgerIdentity::unique_capacity_is_materialized_plus_tail, uniq.slot_rows,
                         uniq.materialized_rows, static_cast<int64_t>(uniq.tail_rows)));
  KVRT_TRY(additive_rows(LedgerIdentity::request_view_is_unique_capacity_plus_avoided, view.slot_rows, uniq.slot_rows,
                         static_cast<int64_t>(save.avoided_rows)));
  KVRT_TRY(additive_rows(LedgerIdentity::logical_is_materialized_plus_deduplicated, rect.logical_rows,
                         uniq.materialized_rows, save.deduplicated_rows));
  KVRT_TRY(additive_rows(LedgerIdentity::pool_is_live_plus_idle, pool.provisioned_blocks, pool.live_blocks,
                         static_cast<int64_t>(pool.idle_blocks)));
  // ... and in bytes.
  for (const IdentityCheck& c : additive_identities(l))
    KVRT_TRY(additive(c.identity, c.total_bytes, c.first_bytes, c.second_bytes, "bytes"));

  if (pool.live_blocks != uniq.unique_blocks || uniq.block_ids.size() != uniq.unique_blocks)
    return broken(LedgerIdentity::live_is_unique, "pool live " + std::to_string(pool.live_blocks) + ", unique " +
                                                      std::to_string(uniq.unique_blocks) + ", listed ids " +
                                                      std::to_string(uniq.block_ids.size()));

  constexpr auto slots = LedgerIdentity::slots_are_blocks_times_block_rows;
  KVRT_TRY(product(slots, "request-view slots", view.slot_rows, view.reference_blocks, P));
  KVRT_TRY(product(slots, "unique slots", uniq.slot_rows, uniq.unique_blocks, P));
  KVRT_TRY(product(slots, "avoided rows", save.avoided_rows, save.avoided_blocks, P));

  constexpr auto bytes = LedgerIdentity::bytes_are_rows_times_row_bytes;
  KVRT_TRY(product(bytes, "logical bytes", rect.logical_bytes, rect.logical_rows, B));
  KVRT_TRY(product(bytes, "reserved bytes", rect.reserved_bytes, rect.reserved_rows, B));
  KVRT_TRY(product(bytes, "slack bytes", rect.slack_bytes, rect.slack_rows, B));
  KVRT_TRY(product(bytes, "request-view capacity bytes", view.capacity_bytes, view.slot_rows, B));
  KVRT_TRY(product(bytes, "request-view logical bytes", view.logical_bytes, view.logical_rows, B));
  KVRT_TRY(product(bytes, "request-view tail bytes", view.tail_bytes, view.tail_rows, B));
  KVRT_TRY(product(bytes, "unique capacity bytes", uniq.capacity_bytes, uniq.slot_rows, B));
  KVRT_TRY(product(bytes, "unique materialized bytes", uniq.materialized_bytes, uniq.materialized_rows, B));
  KVRT_TRY(product(bytes, "unique tail bytes", uniq.tail_bytes, uniq.tail_rows, B));
  KVRT_TRY(product(bytes, "avoided bytes", save.avoided_bytes, save.avoided_rows, B));
  if (static_cast<__int128>(save.deduplicated_bytes) != static_cast<__int128>(save.deduplicated_rows) * B)
    return broken(bytes, "deduplicated bytes " + std::to_string(save.deduplicated_bytes) +
                             " != " + std::to_string(save.deduplicated_rows) + " * " + std::to_string(B));
  KVRT_TRY(product(bytes, "pool bytes", pool.provisioned_bytes, pool.provisioned_blocks, l.row.block_bytes));
  KVRT_TRY(product(bytes, "live bytes", pool.live_bytes, pool.live_blocks, l.row.block_bytes));
  KVRT_TRY(product(bytes, "idle bytes", pool.idle_bytes, pool.idle_blocks, l.row.block_bytes));

  constexpr auto meta = LedgerIdentity::metadata_is_sum_of_records;
  const MetadataLedger& m = l.metadata;
  KVRT_TRY(product(meta, "request-map bytes", m.request_map_bytes, m.counts.request_block_refs,
                   m.record_sizes.request_map_entry));
  KVRT_TRY(
      product(meta, "descriptor bytes", m.descriptor_bytes, m.counts.pool_blocks, m.record_sizes.block_descriptor));
  KVRT_TRY(product(meta, "cached-hash bytes", m.cached_hash_bytes, m.counts.cached_hashes,
                   m.record_sizes.cached_hash_entry));
  KVRT_TRY(
      product(meta, "valid-tail bytes", m.valid_tail_bytes, m.counts.live_requests, m.record_sizes.valid_tail_record));
  KVRT_TRY(product(meta, "free-queue bytes", m.free_queue_bytes, m.counts.free_queue_entries,
                   m.record_sizes.free_queue_entry));
  KVRT_TRY(product(meta, "fixed bytes", m.fixed_bytes, 1, m.record_sizes.fixed));
  const unsigned __int128 parts = static_cast<unsigned __int128>(m.request_map_bytes) + m.descriptor_bytes +
                                  m.cached_hash_bytes + m.valid_tail_bytes + m.free_queue_bytes + m.fixed_bytes;
  if (parts != m.total_bytes)
    return broken(meta, "M_meta " + std::to_string(m.total_bytes) + " != sum of record families");
  // The metadata counts describe the same state as the payload ledgers.
  if (m.counts.request_block_refs != view.reference_blocks || m.counts.pool_blocks != pool.provisioned_blocks ||
      m.counts.cached_hashes != uniq.full_blocks || m.counts.free_queue_entries != pool.idle_blocks)
    return broken(meta, "metadata counts disagree with the payload ledgers (refs, pool, full blocks, free)");
  return Status::success();
}

}  // namespace kvrt
