#pragma once
// The byte ledgers of spec 0x02B-0x02E, reconciled in 0x0D. Each answers a
// different capacity question and none may silently replace another:
//
//   rectangular reference  what contiguous reservations cost (T_max,r) versus the
//                          rows every request view references (T_r)      0x02B
//   paged request view     block-table references counted per request    0x02C
//   unique physical        the union of block ids, with v_p valid rows   0x02D
//   pool                   provisioned blocks = live unique + idle       0x02C
//   metadata               declared record families                      0x02E
//
// Every figure is an exact integer of rows, blocks or bytes. Each ledger term is
// computed from its own definition (per request, per reference or per physical
// block), not as the difference of two others, so the identities checked by
// reconcile_ledgers() (ledger_reconciliation.hpp) are real consequences.
#include <cstdint>
#include <optional>
#include <vector>

#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "tools/ledger/metadata_ledger.hpp"
#include "tools/ledger/request_view.hpp"
#include "tools/ledger/row_ledger.hpp"

namespace kvrt {

inline constexpr uint64_t kMaxLedgerPoolBlocks = uint64_t{1} << 32;

struct LedgerInput {
  std::vector<RequestView> requests;
  // v_p per referenced physical block. Absent: derived as the most rows any
  // request sees in p (exact for nested exact-prefix families). Present: every
  // referenced block must be listed, and max visible <= v_p <= P (0x03G).
  std::optional<ValidRowsByBlock> valid_rows;
  uint64_t pool_blocks = 0;  // N_pool [provisioned blocks], >= unique live blocks
  MetadataRecordSizes record_sizes;
};

struct RectangularLedger {      // 0x02B
  uint64_t logical_rows = 0;    // sum_r T_r
  uint64_t reserved_rows = 0;   // sum_r T_max,r
  uint64_t slack_rows = 0;      // sum_r (T_max,r - T_r)
  uint64_t logical_bytes = 0;   // M_logical,ref
  uint64_t reserved_bytes = 0;  // M_rect,reserved
  uint64_t slack_bytes = 0;     // M_rect,slack
};

struct PagedRequestViewLedger {   // 0x02C
  uint64_t reference_blocks = 0;  // N_ref = sum_r ceil(T_r / P) [block-table entries]
  uint64_t slot_rows = 0;         // N_ref * P [token slots]
  uint64_t logical_rows = 0;      // sum over references of visible rows (= sum_r T_r)
  uint64_t tail_rows = 0;         // sum over references of (P - visible rows)
  uint64_t capacity_bytes = 0;    // M_paged,ref
  uint64_t logical_bytes = 0;
  uint64_t tail_bytes = 0;  // M_tail,ref
};

struct UniquePhysicalLedger {              // 0x02D
  std::vector<PhysicalBlockId> block_ids;  // U, ascending
  uint64_t unique_blocks = 0;              // N_unique = |U|
  uint64_t full_blocks = 0;                // blocks with v_p == P (hashable, 0x09B N_full)
  uint64_t slot_rows = 0;                  // N_unique * P
  uint64_t materialized_rows = 0;          // sum_p v_p
  uint64_t tail_rows = 0;                  // sum_p (P - v_p)
  uint64_t capacity_bytes = 0;             // M_capacity,unique
  uint64_t materialized_bytes = 0;         // M_materialized,unique
  uint64_t tail_bytes = 0;                 // M_tail,unique
};

struct SharingSavings {  // 0x02D: two savings ledgers that need not be equal
  // Logical payload deduplicated = sum_p (sum of rows its referencing views see
  // - v_p). Signed: a block may hold valid rows no live view sees (v_p above
  // every visible count), which makes the term negative for that block.
  int64_t deduplicated_rows = 0;
  int64_t deduplicated_bytes = 0;
  // Request-reference capacity avoided = sum_p (references to p - 1) * P.
  uint64_t avoided_blocks = 0;
  uint64_t avoided_rows = 0;
  uint64_t avoided_bytes = 0;
};

struct PoolLedger {                 // 0x02C
  uint64_t provisioned_blocks = 0;  // N_pool
  uint64_t live_blocks = 0;         // N_live = reachable unique blocks
  uint64_t idle_blocks = 0;         // N_free: reusable, not fragmentation by itself
  uint64_t provisioned_bytes = 0;   // M_pool
  uint64_t live_bytes = 0;          // M_live,unique
  uint64_t idle_bytes = 0;          // M_pool,idle
};

struct ByteLedgers {
  RowLedger row;
  RectangularLedger rectangular;
  PagedRequestViewLedger request_view;
  UniquePhysicalLedger unique;
  SharingSavings savings;
  PoolLedger pool;
  MetadataLedger metadata;
};

// Validates the layout, views, valid rows, pool and record sizes, then computes
// every ledger. Errors are typed and name the field; nothing is partially built.
Result<ByteLedgers> compute_byte_ledgers(const CacheLayoutManifest& manifest, const LedgerInput& input);

}  // namespace kvrt
