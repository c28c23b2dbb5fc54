#pragma once
// Arguments and receipt shared by the two shared-prefix schedules
// (hydragen_attention.hpp, chunk_attention.hpp). Both run one decode query
// row per sequence and query head over an ExecutionSnapshot and must produce
// each sequence's monolithic attention row (0x0BA); they differ only in how
// they partition the work and which partial states they keep.
#include <cstdint>
#include <span>

#include "services/executor/execution_snapshot.hpp"
#include "services/executor/shared_prefix_ledger.hpp"
#include "services/executor/thread_pool.hpp"
#include "services/executor/workspace.hpp"

namespace kvrt::executor {

template <class T>
struct SharedPrefixArgsT {
  const ExecutionSnapshot* snapshot = nullptr;
  SnapshotFence fence;         // what the caller planned against
  HeadMapping heads;           // the queries' mapping; must equal the contract's
  std::span<const T> queries;  // [B][H_q][d_qk], B = sequences, in sequence order
  std::span<T> outputs;        // [B][H_q][d_v]
  std::span<T> lse;            // [B][H_q] or empty
};
using SharedPrefixArgs = SharedPrefixArgsT<float>;
using SharedPrefixArgs64 = SharedPrefixArgsT<double>;

struct SharedPrefixReceipt {
  Sha256Digest snapshot_digest;  // the exact snapshot executed
  SharedPrefixLedger ledger;     // from the snapshot (LedgerWidths from the pool and T)
  uint64_t batched_chunks = 0;   // chunks run as one batched (tile) product [chunks]
  uint64_t partial_states = 0;   // partial states written and read back [states]
};

// Checks shared by both schedules, in order: a snapshot is given, the
// snapshot against the pool and fence (ExecutionSnapshot::validate_for), then
// query/output/LSE sizes (executor_shape_mismatch).
template <class T>
Status check_shared_prefix_args(const PagedKvView& view, const SharedPrefixArgsT<T>& a) {
  if (a.snapshot == nullptr) return make_error(ErrorCode::invalid_argument, "no snapshot", "snapshot");
  KVRT_TRY(a.snapshot->validate_for(view, a.fence, a.heads));
  const uint64_t rows = uint64_t{a.snapshot->sequences.size()} * a.heads.q_heads;
  KVRT_TRY(check_span_size(a.queries.size(), rows * view.k.head_dim, "queries"));
  KVRT_TRY(check_span_size(a.outputs.size(), rows * view.v.head_dim, "outputs"));
  return check_span_size(a.lse.size(), rows, "lse", /*optional=*/true);
}

// Ledger widths of a pool view, with partial outputs kept in T.
template <class T>
LedgerWidths ledger_widths(const PagedKvView& view) {
  return LedgerWidths{
      uint64_t{view.k.head_dim} * view.k.scalar_bytes() + uint64_t{view.v.head_dim} * view.v.scalar_bytes(),
      static_cast<uint32_t>(sizeof(T)), static_cast<uint32_t>(sizeof(T))};
}

}  // namespace kvrt::executor
