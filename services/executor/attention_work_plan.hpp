#pragma once
// AttentionWorkPlan: the host half of a device attention launch. It turns
// validated block tables (ordinary paged decode) or a validated execution
// snapshot (shared-prefix / cascade execution, 0x0BB) into flat work lists
// (attention_work_items.hpp) and the merge lists that say which partials make
// up each sequence's row. The CUDA launchers upload it unchanged; the plan is
// pure C++ so its tiling is tested on machines without a GPU
// (tests/executor_work_plan_test.cpp executes it in FP64 on the CPU).
//
// Split-K (0x0A): a chunk's keys are cut into partitions of P_part keys; each
// partition of each reading sequence is one partial. A chunk whose coverage
// exceeds the shared threshold tau (0x0BD) runs chunk-first as tile items of
// at most `tile_sequences` sequences, so its K/V rows are read once per tile
// instead of once per sequence (Hydragen is tau = 1: every shared chunk is
// batched). Everything else runs sequence-first.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/attention_work_items.hpp"
#include "services/executor/execution_snapshot.hpp"

namespace kvrt::executor {

struct WorkPlanOptions {
  // P_part [keys]: keys per partition. 0 chooses 512 (a multiple of every
  // supported P_k). A positive value must be a multiple of P_k.
  uint32_t partition_tokens = 0;
  // Largest number of sequences one tile item batches (the device tile holds
  // tile_sequences x G query rows). 0 chooses 64 / G, at least 1.
  uint32_t tile_sequences = 0;
  uint32_t kernel_block_tokens = 0;  // P_k as in AttentionOptions (0 = P_a)
};

struct AttentionWorkPlan {
  std::vector<PlanRowRun> runs;
  std::vector<PlanChunk> chunks;
  std::vector<PlanSequenceItem> sequence_items;
  std::vector<PlanTileItem> tile_items;
  // Sequence s merges partials merge_partials[merge_offsets[s] .. merge_offsets[s+1]).
  std::vector<uint32_t> merge_offsets;  // [sequences + 1]
  std::vector<uint32_t> merge_partials;
  uint32_t sequences = 0;
  uint32_t partial_count = 0;        // partials the launch writes [partials]
  uint32_t kernel_block_tokens = 0;  // P_k used [keys]
  uint32_t partition_tokens = 0;     // P_part used [keys]
  uint32_t tile_sequences = 0;       // used [sequences per tile]

  // Keys a launch reads from the pool, summed over work items (one read of a
  // chunk-first partition serves its whole tile) [key rows per K/V head].
  uint64_t key_rows_read() const;
};

// Ordinary paged decode: request r is sequence r, one private chunk over its
// table's positions [0, T). Runs every check paged_decode() runs on the CPU
// (head mapping, block tables against the view, P_k | P_a, P_k | P_part).
Result<AttentionWorkPlan> plan_paged_decode(const PagedKvView& view, const HeadMapping& heads,
                                            std::span<const DecodeRequest> requests, const WorkPlanOptions& options);

// Shared-prefix execution of a snapshot with its contract's threshold tau.
// Runs ExecutionSnapshot::validate_for first, so a stale fence, a coverage
// overlap or gap, a head-mapping mismatch or a padding-row read is refused
// before anything is planned.
Result<AttentionWorkPlan> plan_shared_prefix(const PagedKvView& view, const ExecutionSnapshot& snapshot,
                                             const SnapshotFence& fence, const HeadMapping& heads,
                                             const WorkPlanOptions& options);

}  // namespace kvrt::executor
