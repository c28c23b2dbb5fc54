#pragma once
// Paged prefill of a suffix over a cached prefix (spec 0x0B's
// "find token-prefix hit -> reuse K/V -> prefill suffix"). The request's
// table already holds the reused prefix rows and the suffix rows the model
// just wrote; suffix token i (position T - n + i) attends to positions
// [0, T - n + i]: all of the prefix, and the suffix causally.
//
// Chunked: a request's suffix is cut into chunks of C query tokens; each
// (request, chunk, K/V head) is one work item that batches the chunk's C x G
// query rows into the tile kernel against keys [0, last position of the
// chunk], masking per row the keys after its own position. Keys past a chunk
// are never read, so a chunk costs what its causal window needs.
#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/thread_pool.hpp"

namespace kvrt::executor {

struct PrefillReceipt {
  uint32_t kernel_block_tokens = 0;  // P_k [tokens]
  uint32_t chunk_tokens = 0;         // C [tokens]
  uint64_t chunks = 0;               // sum over requests of ceil(n / C) [chunks]
  uint64_t query_rows = 0;           // sum of suffix tokens [tokens]
};

// Errors (before any write): those of paged_decode, plus
// executor_frontier_mismatch when a suffix is empty or longer than its
// context, invalid_argument for chunk_tokens above 4096.
Result<PrefillReceipt> paged_prefill(const PagedKvView& view, const PrefillArgs& args, ThreadPool* pool = nullptr);
Result<PrefillReceipt> paged_prefill(const PagedKvView& view, const PrefillArgs64& args, ThreadPool* pool = nullptr);

}  // namespace kvrt::executor
