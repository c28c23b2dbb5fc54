#pragma once
// ExecutorService: the kernel executor owner as the node serves it
// (docs/architecture.md, "How one call travels"). It runs decode attention for a
// session's request over the node's own shared-memory pools, reading them in
// place through the executor's paged kernels (services/executor/), with the
// request's block table as the allocator owner resolved it for that session:
// the worker names a request and a table version, never a block or a slot,
// so it can only make the kernels read rows its own receipts hold (0x0BH).
// No CAF here: actors/executor_actor.cpp fetches the table and calls decode().
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "schema/allocator_types.hpp"
#include "schema/executor_types.hpp"
#include "schema/session_types.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/shared_prefix_args.hpp"
#include "services/executor/thread_pool.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "services/reuse/reuse_step_answers.hpp"

namespace kvrt {

class ExecutorService {
 public:
  // The decode kernel over one layer's view: by default the CPU's
  // executor::paged_decode; a node whose pools are GPU memory passes the
  // CUDA kernel (gpu/cuda_decode_kernel.hpp), whose views hold device
  // addresses. Same arguments, same checks, same receipt.
  using DecodeKernel =
      std::function<Result<executor::DecodeReceipt>(const executor::PagedKvView&, const executor::DecodeArgs&)>;
  // The shared-prefix kernel of a node whose pools are GPU memory: the CUDA
  // cascade (gpu/cuda_decode_kernel.hpp), which runs the prefix tree's
  // snapshot in ChunkAttention's two phases (chunks shared widely enough
  // chunk-first, the rest sequence-first) with the exact LSE merge. Empty:
  // the CPU's Hydragen and ChunkAttention.
  using SharedPrefixKernel = std::function<Result<executor::SharedPrefixReceipt>(const executor::PagedKvView&,
                                                                                 const executor::SharedPrefixArgs&)>;

  // layer_views[l]: model layer l of the node's pools; block_id_base[g]: the
  // allocator's first block id of cache group g (slot = block id - base).
  // threads > 1 runs the CPU kernels on a pool of that many workers.
  static Result<std::unique_ptr<ExecutorService>> create(const CacheLayoutManifest& layout,
                                                         std::vector<executor::PagedKvView> layer_views,
                                                         std::vector<uint64_t> block_id_base, unsigned threads,
                                                         DecodeKernel kernel = {},
                                                         SharedPrefixKernel shared_kernel = {});

  // op.kernel_block_tokens chooses P_k (0x0AC; 0: P_k = P_a); the output
  // carries the split ledger (P_k, kernel blocks, partitions).
  // Errors, before any kernel runs: coordinate_out_of_range (layer),
  // stale_table_version (the table moved past op.table_version),
  // executor_head_mapping, executor_shape_mismatch (queries),
  // kernel_block_not_divisor (P_k does not divide P_a), and every refusal
  // of the kernel's own checks (check_block_table).
  Result<AttentionOutput> decode(const DecodeAttentionOp& op, const BlockTableView& table);

  // Decode of one layer for requests that share physical prefix blocks
  // (0x0BA-0x0BD): tables[i] is op.members[i]'s block table as the
  // allocator resolved it for the session. The prefix tree comes from those
  // tables (executor/shared_prefix_plan.hpp), then the design runs with the
  // exact LSE merge: Hydragen, ChunkAttention (auto: ChunkAttention when a
  // path has more than one shared level), or per-request decode. On GPU
  // pools the shared designs run as the CUDA cascade (ChunkAttention's two
  // phases; the output names chunk_attention, and why when Hydragen was
  // asked). A batch with no shared block, or GPU pools without a shared
  // kernel, falls back to per-request decode, and the output says why.
  // Errors, before any kernel runs: those of decode()
  // for every member, invalid_argument (no member, a request named twice,
  // a table count that is not the members'), executor_shape_mismatch.
  Result<SharedPrefixOutput> shared_decode(const SharedPrefixDecodeOp& op, std::span<const BlockTableView> read_tables);

  // Step 8 of the executable-reuse transaction (0x0CD): freezes the
  // snapshot a reuse reads (the handles and interval as given, the kernel ABI
  // of this executor: the layout's logical cache ABI) under a new version.
  // The coordinator plans the batch against the version it is handed here,
  // so planned and frozen agree; the ABI the consumer's key names is carried
  // beside this executor's for the attempt to compare.
  SnapshotAnswer freeze_reuse(const ReuseSnapshotRequest& request);

  OwnerStats stats() const;
  Status validate() const;

 private:
  ExecutorService(CacheLayoutManifest layout, std::vector<executor::PagedKvView> views, std::vector<uint64_t> base,
                  unsigned threads);
  CacheLayoutManifest layout_;
  std::vector<executor::PagedKvView> views_;
  std::vector<uint64_t> block_id_base_;
  DecodeKernel kernel_;               // empty: executor::paged_decode on the CPU
  SharedPrefixKernel shared_kernel_;  // empty: the CPU's shared designs
  std::unique_ptr<executor::ThreadPool> pool_;
  uint64_t snapshots_frozen_ = 0;
  uint64_t executions_ = 0, errors_ = 0, kv_rows_ = 0, kv_bytes_ = 0;
  // Shared-prefix batches: executed by a shared design, fallen back to
  // per-request decode, and the rows the shared designs did not read again.
  uint64_t shared_batches_ = 0, shared_fallbacks_unshared_ = 0, shared_fallbacks_gpu_ = 0, shared_rows_saved_ = 0;

  // The cache group of `layer`, after the layer and head checks of every op.
  Result<uint32_t> check_layer(uint32_t layer, uint32_t q_heads) const;
  // One request's paged decode over `layer` (outputs and lse sized by the
  // caller), with kernel blocks of P_k rows (0: P_k = P_a).
  Result<executor::DecodeReceipt> decode_rows(uint32_t layer, uint32_t g, uint32_t q_heads, const BlockTableView& table,
                                              std::span<const float> queries, std::span<float> outputs,
                                              std::span<float> lse, uint32_t kernel_block_tokens = 0);
};

}  // namespace kvrt
