#pragma once
// The immutable execution snapshot of shared-prefix attention (spec 0x0BB):
// the tensor contract under which a partitioned schedule (Hydragen,
// ChunkAttention) reproduces every sequence's monolithic attention row.
//
//   tree version and tree-state digest      -> SnapshotFence, checked first
//   sequence order                          -> sequences[], = query row order
//   ordered chunk path for each sequence    -> SnapshotSequence::path
//   chunk identity digest, coverage         -> SnapshotChunk
//   K/V shape, head mapping, dtype, scale   -> ExecutionContract
//   shared/private execution threshold      -> ExecutionContract::shared_threshold
//
// A chunk is a run of K/V rows at consecutive positions [first_position,
// first_position + T_c) of every sequence that reads it, stored as row runs
// inside the pool's blocks. Its coverage [coverage_begin, coverage_end) is a
// half-open interval of sequence indices: exactly the sequences whose paths
// contain it, so a chunk-first kernel maps one chunk to one contiguous block
// of query rows (0x0BB; reordering sequences without rebuilding the intervals
// makes the metadata stale even when the K/V bytes are unchanged).
//
// Partition identity (0x0BA): each sequence's path covers its legal keys
// [0, context_tokens) exactly once, in order. validate_for() refuses any
// snapshot a kernel could not execute exactly: a stale fence, a head mapping
// that is not the queries' or the pool's, a key position read twice (overlap)
// or never (gap), a coverage interval that claims a sequence not reading the
// chunk (overlap) or misses one that does (gap), a path that runs past its
// sequence's frontier, or a run that reads rows past its block's committed
// rows (padding, row_not_valid).
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/digest.hpp"
#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/kv_view.hpp"

namespace kvrt::executor {

// Rows [first_row, first_row + rows) of the block in `slot`.
struct KvRowRun {
  uint32_t slot = 0;        // [slot index]
  uint32_t first_row = 0;   // [rows]
  uint32_t rows = 0;        // [rows]
  uint32_t valid_rows = 0;  // committed rows of that block, its descriptor's frontier [rows]
  friend bool operator==(const KvRowRun&, const KvRowRun&) = default;
};

struct SnapshotChunk {
  std::string name;
  Sha256Digest identity;        // exact K/V identity (from the prefix/radix owner)
  uint64_t first_position = 0;  // [tokens]
  std::vector<KvRowRun> runs;   // in position order
  uint32_t coverage_begin = 0;  // first sequence index that reads the chunk
  uint32_t coverage_end = 0;    // one past the last

  uint64_t tokens() const;  // T_c [rows]
  uint32_t coverage() const { return coverage_end - coverage_begin; }
};

struct SnapshotSequence {
  RequestId request;
  TableVersion table_version;
  uint64_t context_tokens = 0;  // the sequence's frontier: keys its query row attends [tokens]
  std::vector<uint32_t> path;   // chunk indices, root first
};

struct ExecutionContract {
  HeadMapping heads;
  uint32_t qk_dim = 0;  // d_qk [lanes]; scores are scaled by 1/sqrt(d_qk)
  uint32_t v_dim = 0;   // d_v [lanes]
  ScalarType k_dtype = ScalarType::fp32;
  ScalarType v_dtype = ScalarType::fp32;
  // tau: ChunkAttention materialises a chunk in its chunk-first phase when
  // coverage(c) > tau (0x0BD); below or at tau it stays sequence-first.
  uint32_t shared_threshold = 1;
};

// What the caller planned against.
struct SnapshotFence {
  uint64_t tree_version = 0;
  Sha256Digest tree_state_digest;
};

struct ExecutionSnapshot {
  uint64_t tree_version = 0;
  Sha256Digest tree_state_digest;
  ExecutionContract contract;
  std::vector<SnapshotChunk> chunks;        // tree order
  std::vector<SnapshotSequence> sequences;  // sequence order = query row order

  SnapshotFence fence() const { return SnapshotFence{tree_version, tree_state_digest}; }
  // Canonical digest over every field (a receipt can name the exact snapshot).
  Sha256Digest digest() const;

  // Pool-independent structure: paths tile each frontier exactly once, and
  // coverage intervals equal path membership. Errors as described above.
  Status validate() const;
  // Everything a kernel would read: the fence, the contract against the
  // queries' head mapping and the pool view, every run inside the pool and
  // its committed rows, then validate().
  Status validate_for(const PagedKvView& view, const SnapshotFence& expected, const HeadMapping& query_heads) const;

  // Sets every chunk's coverage interval from path membership. Fails with
  // executor_coverage_gap when the sequences reading a chunk are not
  // consecutive in sequence order (no interval can describe them), or when a
  // chunk is read by no sequence.
  Status assign_coverage();
};

}  // namespace kvrt::executor
