#pragma once
// The decode batch of a block-size sweep at one P_a: the running requests'
// real tables (from the prefix replay), compacted into a plain fp32 pool,
// and what the CPU kernels do with them: one paged decode step per P_k
// (0x0A) and one shared-prefix step per chunk size P_c (ChunkAttention,
// 0x0BD), each beside the same run's read floor. Internal to
// block_size_sweep.cpp; its own file because the sweep's ledgers need none
// of it.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/executor/kv_view.hpp"
#include "tools/blocksize/block_size_sweep.hpp"

namespace kvrt::blocksize {

// A running request of the replay: its tokens from position 0 (prompt then
// decode), its namespace salt and the block ids its table names.
struct RunningRequest {
  std::vector<TokenId> tokens;
  std::string salt;
  std::vector<uint32_t> blocks;
};

// h[L] for L = 0..T: a 64-bit hash of (salt, tokens [0, L)), so that equal
// prefixes of two requests compare in O(1) (the sweep's storage identity and
// the chunk identities of the shared-prefix snapshot).
std::vector<uint64_t> prefix_hashes(const RunningRequest& r);
// Combines a hash with one more value (a splitmix64 finaliser).
uint64_t mix_hash(uint64_t h, uint64_t v);

class DecodeBatch {
 public:
  // The first requests in arrival order whose contexts fit max_rows (at
  // least one); `written` is each block's committed rows. With timing the
  // pool is filled (fp32, q/kv heads and lanes of `timing`); without, only
  // the tables are kept.
  static Result<DecodeBatch> build(const std::vector<RunningRequest>& running,
                                   const std::unordered_map<uint32_t, uint64_t>& written, uint32_t block_tokens,
                                   const KernelTimingConfig& timing);

  // Times one paged decode step at P_k = k.kernel_block into k (needs trials > 0).
  Status time_paged(KernelTableCost& k) const;
  // The shared-prefix snapshot at chunk size P_c over the batch (sequences
  // in lexicographic order, so those sharing a chunk are consecutive) and its
  // ledger; with timing, one ChunkAttention step and the paged step at
  // P_k = P_a over the same batch.
  Result<ChunkCost> chunks(uint32_t chunk_tokens) const;

 private:
  DecodeBatch() = default;
  // Median seconds of `trials` runs of a plain read of `bytes` of the pool.
  double read_floor(uint64_t bytes) const;

  const std::vector<RunningRequest>* running_ = nullptr;
  std::vector<size_t> chosen_;                        // indices into running_
  std::vector<std::vector<uint32_t>> slots_, valid_;  // per chosen request: compact slot and committed rows per block
  uint32_t block_tokens_ = 0;
  KernelTimingConfig timing_;
  std::vector<float> k_, v_;
  executor::PagedKvView view_;
};

}  // namespace kvrt::blocksize
