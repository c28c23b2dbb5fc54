#include "services/executor/shared_prefix_ledger.hpp"

#include "services/common/units.hpp"

namespace kvrt::executor {

SharedPrefixLedger shared_prefix_ledger(const ExecutionSnapshot& s, const LedgerWidths& widths) {
  SharedPrefixLedger out;
  for (const SnapshotSequence& q : s.sequences)
    for (uint32_t c : q.path) out.logical_pairs += s.chunks[c].tokens();
  for (const SnapshotChunk& c : s.chunks) {
    out.unique_rows += c.tokens();
    ++out.chunks;
    if (c.coverage() > s.contract.shared_threshold) {
      out.partial_rows += c.coverage();
      ++out.materialised_chunks;
    }
  }
  out.saved_reads = out.logical_pairs - out.unique_rows;
  out.partial_row_bytes = uint64_t{s.contract.v_dim} * widths.partial_output_bytes + 2ull * widths.state_bytes;
  out.partial_bytes = out.partial_rows * out.partial_row_bytes;
  out.baseline_kv_bytes = out.logical_pairs * widths.kv_row_bytes;
  out.shared_kv_bytes = out.unique_rows * widths.kv_row_bytes;
  return out;
}

uint64_t ordinary_chunk_visits(const ExecutionSnapshot& s, uint32_t chunk_tokens) {
  uint64_t visits = 0;
  for (const SnapshotSequence& q : s.sequences) visits += ceil_div(q.context_tokens, chunk_tokens);
  return visits;
}

}  // namespace kvrt::executor
