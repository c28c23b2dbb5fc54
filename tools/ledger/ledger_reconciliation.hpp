#pragma once
// Reconciliation of the byte ledgers (spec 0x0D "checked identities"). The
// ledgers compute each term from its own definition, so these identities are
// consequences that a wrong count breaks — for instance the 0x0D negative
// fixture that counts all six request references as six unique blocks.
#include <cstdint>
#include <string_view>
#include <vector>

#include "services/common/result.hpp"
#include "tools/ledger/byte_ledger.hpp"

namespace kvrt {

enum class LedgerIdentity : uint8_t {
  // B_row,g = K + V per group, B_row,rank = sum_g B_row,g, block = P * B_row (0x02A, 0x03B).
  row_is_sum_of_groups,
  // M_rect,reserved = M_logical,ref + M_rect,slack (0x02B).
  reserved_is_logical_plus_slack,
  // M_paged,ref = M_logical,ref + M_tail,ref (0x02C).
  request_view_is_logical_plus_tail,
  // M_capacity,unique = M_materialized,unique + M_tail,unique (0x02D).
  unique_capacity_is_materialized_plus_tail,
  // M_paged,ref = M_capacity,unique + reference capacity avoided by sharing (0x02D).
  request_view_is_unique_capacity_plus_avoided,
  // M_logical,ref = M_materialized,unique + logical payload deduplicated (0x02D).
  logical_is_materialized_plus_deduplicated,
  // M_pool = M_live,unique + M_pool,idle (0x02C).
  pool_is_live_plus_idle,
  // The pool's live blocks are exactly the unique physical blocks (0x02C, 0x02D).
  live_is_unique,
  // Slot rows = blocks * P wherever a ledger counts blocks.
  slots_are_blocks_times_block_rows,
  // Every byte figure = its row (or block) figure * B_row (or P * B_row).
  bytes_are_rows_times_row_bytes,
  // M_meta = the sum of its record families (0x02E).
  metadata_is_sum_of_records,
};

// "reserved = logical + slack", ...: the identity as one would write it.
std::string_view to_string(LedgerIdentity identity);

// One additive identity total = first + second, in bytes (signed because the
// deduplicated payload may be negative, see SharingSavings).
struct IdentityCheck {
  LedgerIdentity identity;
  int64_t total_bytes = 0;
  int64_t first_bytes = 0;
  int64_t second_bytes = 0;
  bool holds() const { return total_bytes == first_bytes + second_bytes; }
};

// The six 0x0D identities plus the pool, in the order 0x0D prints them.
std::vector<IdentityCheck> additive_identities(const ByteLedgers& ledgers);

// Checks every LedgerIdentity, in rows and in bytes. The first broken one is
// returned as ErrorCode::ledger_identity_broken with field = to_string(identity)
// and the operands in the reason.
Status reconcile_ledgers(const ByteLedgers& ledgers);

}  // namespace kvrt
