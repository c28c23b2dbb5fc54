#pragma once
// Row ledger (spec 0x02A): the bytes one token occupies on this worker, derived
// per cache group from the layout manifest before anything counts blocks.
//
//   B_row,g    = L_g * H_kv,g_local * d_h,g * (b_K,g + b_V,g)  [bytes / token / rank]
//   B_row,rank = sum_g B_row,g
//
// K and V widths are kept apart: the familiar factor 2 holds only when b_K == b_V.
#include <cstdint>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt {

struct GroupRowLedger {
  CacheGroupId group_id;
  uint32_t layers = 0;          // L_g [layers]
  uint32_t kv_heads_local = 0;  // H_kv,g on this rank [heads]
  uint32_t head_dim = 0;        // d_h,g [scalars / head]
  uint32_t k_scalar_bytes = 0;  // b_K,g [bytes / scalar]
  uint32_t v_scalar_bytes = 0;  // b_V,g [bytes / scalar]
  uint64_t k_row_bytes = 0;     // L_g * H * d_h * b_K [bytes / token]
  uint64_t v_row_bytes = 0;     // L_g * H * d_h * b_V [bytes / token]
  uint64_t row_bytes = 0;       // B_row,g = K + V [bytes / token]
  uint64_t block_bytes = 0;     // P * B_row,g [bytes / group block] (0x03B)
};

struct RowLedger {
  std::vector<GroupRowLedger> groups;
  uint64_t row_bytes = 0;    // B_row,rank [bytes / token / rank]
  uint32_t block_rows = 0;   // P = P_a [rows (token slots) / block]
  uint64_t block_bytes = 0;  // P * B_row,rank [bytes / block bundle across groups] (0x03B)
};

// Largest B_row,rank the ledgers accept [bytes / token]: keeps every later
// rows * B_row product inside 64 bits for the row counts they admit.
inline constexpr uint64_t kMaxLedgerRowBytes = uint64_t{1} << 32;
// Largest P the ledgers accept [rows / block]; with the row bound, a block
// bundle stays below 2^52 bytes.
inline constexpr uint32_t kMaxLedgerBlockRows = uint32_t{1} << 20;

// Validates the manifest (its own structural rules) and derives the row ledger.
// A row wider than kMaxLedgerRowBytes or a block longer than kMaxLedgerBlockRows
// is an invalid_argument naming the field.
Result<RowLedger> derive_row_ledger(const CacheLayoutManifest& manifest);

}  // namespace kvrt
