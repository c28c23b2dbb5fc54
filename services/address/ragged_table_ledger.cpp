#include "services/address/ragged_table_ledger.hpp"

#include <algorithm>
#include <string>

namespace kvrt {

Result<RaggedTableLedger> ragged_table_ledger(std::span<const uint64_t> context_lengths, uint32_t kernel_block_size,
                                              uint32_t entry_bytes) {
  if (kernel_block_size == 0)
    return make_error(ErrorCode::invalid_argument, "kernel block size must be positive", "kernel_block_size");
  if (entry_bytes == 0)
    return make_error(ErrorCode::invalid_argument, "a table cell must be at least one byte", "entry_bytes");
  RaggedTableLedger out;
  out.kernel_block_size = kernel_block_size;
  out.entry_bytes = entry_bytes;
  out.rows = context_lengths.size();
  unsigned __int128 used = 0;
  for (uint64_t t : context_lengths) {
    // ceil(T / P_k) without the (T + P - 1) overflow near 2^64.
    const uint64_t n = t / kernel_block_size + (t % kernel_block_size != 0 ? 1 : 0);
    out.blocks_per_row.push_back(n);
    out.max_blocks = std::max(out.max_blocks, n);
    used += n;
  }
  const unsigned __int128 dense = static_cast<unsigned __int128>(out.rows) * out.max_blocks;
  if (dense * entry_bytes > UINT64_MAX)
    return make_error(ErrorCode::invalid_argument,
                      "a dense table of " + std::to_string(out.rows) + " x " + std::to_string(out.max_blocks) +
                          " cells overflows 64-bit byte counts",
                      "context_lengths");
  out.dense_cells = static_cast<uint64_t>(dense);
  out.used_cells = static_cast<uint64_t>(used);  // used <= dense
  out.padding_cells = out.dense_cells - out.used_cells;
  return out;
}

}  // namespace kvrt
