#pragma once
// ChunkAttention (spec 0x0BD): a prefix-tree snapshot run in two phases.
//
//   chunk-first:    every chunk whose coverage exceeds the contract's
//                   threshold tau is run once per K/V head against all the
//                   query rows it covers (the tile kernel), and its
//                   unnormalised partial states (u, m, l) are materialised in
//                   a partial buffer at offsets from build_chunk_first_metadata
//                   (begins, ends, offsets; partial_rows = sum coverage);
//   sequence-first: per (sequence, K/V head), traverse the path's remaining
//                   (private or below-threshold) chunks in one online-softmax
//                   pass, then merge the sequence's materialised partial
//                   states and the private state with the exact merge.
//
// Materialising gives the shared phase independent output rows (no
// parent/child ordering, no atomics) at the cost of the partial buffer, whose
// size the ledger reports (0x0BD, 0x0BE: 112 B in the four-sequence fixture).
// A sequence whose whole path was materialised has an empty private state,
// which the merge treats as the identity (0x0BA).
#include <cstdint>
#include <vector>

#include "services/common/result.hpp"
#include "services/executor/shared_prefix_args.hpp"

namespace kvrt::executor {

// The host-side metadata of the chunk-first phase (0x0BD's
// build_chunk_first_metadata): one entry per materialised chunk.
struct ChunkFirstMetadata {
  std::vector<uint32_t> chunk;    // chunk index
  std::vector<uint32_t> begins;   // coverage begin
  std::vector<uint32_t> ends;     // coverage end
  std::vector<uint64_t> offsets;  // first partial row [rows]
  uint64_t partial_rows = 0;      // [rows] (per query head)
};
ChunkFirstMetadata build_chunk_first_metadata(const ExecutionSnapshot& snapshot);

// Errors (before any write): those of check_shared_prefix_args.
Result<SharedPrefixReceipt> chunk_attention(const PagedKvView& view, const SharedPrefixArgs& args,
                                            ThreadPool* pool = nullptr, Workspace* workspace = nullptr);
Result<SharedPrefixReceipt> chunk_attention(const PagedKvView& view, const SharedPrefixArgs64& args,
                                            ThreadPool* pool = nullptr, Workspace* workspace = nullptr);

}  // namespace kvrt::executor
