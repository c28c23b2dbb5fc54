#pragma once
// The second traversal ledger of ragged batches (spec 0x0AB). For request
// block counts n_r = ceil(T_r / P_k), a dense rectangular staging table with
// B rows and n_max = max_r n_r columns holds
//
//   N_table = B * n_max,   N_used = sum_r n_r,   N_pad = N_table - N_used
//
// entries [cells]; at int32 block ids each cell is 4 bytes. A few long rows
// set n_max for every short row, which is the point of the ledger.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/result.hpp"

namespace kvrt {

inline constexpr uint32_t kInt32TableEntryBytes = 4;  // [bytes / block-table cell]

struct RaggedTableLedger {
  uint32_t kernel_block_size = 0;        // P_k [tokens / block]
  uint32_t entry_bytes = 0;              // [bytes / cell]
  std::vector<uint64_t> blocks_per_row;  // n_r [blocks]
  uint64_t rows = 0;                     // B [requests]
  uint64_t max_blocks = 0;               // n_max [blocks]
  uint64_t dense_cells = 0;              // B * n_max [cells]
  uint64_t used_cells = 0;               // sum n_r [cells]
  uint64_t padding_cells = 0;            // dense - used [cells]

  uint64_t dense_bytes() const { return dense_cells * entry_bytes; }
  uint64_t used_bytes() const { return used_cells * entry_bytes; }
  uint64_t padding_bytes() const { return padding_cells * entry_bytes; }
};

// Errors: invalid_argument (zero P_k or entry size, or a table whose cell or
// byte count overflows 64 bits).
Result<RaggedTableLedger> ragged_table_ledger(std::span<const uint64_t> context_lengths, uint32_t kernel_block_size,
                                              uint32_t entry_bytes = kInt32TableEntryBytes);

}  // namespace kvrt
