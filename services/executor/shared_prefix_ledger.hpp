#pragma once
// Work and payload ledgers of a shared-prefix execution snapshot (spec 0x0BE,
// 0x0BI), computed from the snapshot itself:
//
//   N_logical-pairs = sum_r sum_{c in path(r)} T_c     K/V rows an ordinary
//                                                      per-sequence decode reads
//   N_physical-KV   = sum_{c in C} T_c                 rows a shared schedule reads
//   N_saved-reads   = N_logical-pairs - N_physical-KV
//   N_partial       = sum_{c: coverage(c) > tau} coverage(c)   ChunkAttention's
//                                                      materialised partial rows
//   M_partial       = N_partial (d_v b_O + 2 b_state)  [bytes]
//
// The K/V-read ledger is the spec's conceptual payload model: it excludes
// query reads, output writes, metadata, cache lines, launches and the
// partial-state traffic itself (0x0BE), and predicts no latency.
//
// Traversal (0x0BI) depends on the chunk size P_c while the row counts do
// not: an ordinary schedule visits sum_r ceil(T_r / P_c) chunks, the shared
// snapshot visits its own chunk objects.
#include <cstdint>

#include "services/executor/execution_snapshot.hpp"

namespace kvrt::executor {

struct LedgerWidths {
  uint64_t kv_row_bytes = 0;          // K plus V payload of one row [bytes]
  uint32_t partial_output_bytes = 2;  // b_O: bytes per partial-output lane (0x0BD source: the output type)
  uint32_t state_bytes = 4;           // b_state: bytes per max and per sum (0x0BD source: float)
};

struct SharedPrefixLedger {
  uint64_t logical_pairs = 0;        // [rows]
  uint64_t unique_rows = 0;          // [rows]
  uint64_t saved_reads = 0;          // [rows]
  uint64_t partial_rows = 0;         // [rows]
  uint64_t partial_row_bytes = 0;    // d_v b_O + 2 b_state [bytes]
  uint64_t partial_bytes = 0;        // [bytes]
  uint64_t baseline_kv_bytes = 0;    // logical_pairs * kv_row_bytes [bytes]
  uint64_t shared_kv_bytes = 0;      // unique_rows * kv_row_bytes [bytes]
  uint64_t chunks = 0;               // chunk objects the shared schedule visits [chunks]
  uint64_t materialised_chunks = 0;  // chunks with coverage > tau [chunks]
};

// Counts over a snapshot that passes validate() (the kernels validate first).
SharedPrefixLedger shared_prefix_ledger(const ExecutionSnapshot& snapshot, const LedgerWidths& widths);

// 0x0BI ordinary traversal: sum_r ceil(T_r / P_c) [chunks].
uint64_t ordinary_chunk_visits(const ExecutionSnapshot& snapshot, uint32_t chunk_tokens);

}  // namespace kvrt::executor
