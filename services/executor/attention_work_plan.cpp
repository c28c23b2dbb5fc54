#include "services/executor/attention_work_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "services/executor/block_table.hpp"

namespace kvrt::executor {
namespace {

constexpr uint32_t kDefaultPartitionTokens = 512;  // [keys]
constexpr uint32_t kDefaultTileRows = 64;          // query rows of one device tile

Error too_large(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, what + " exceeds the 32-bit range of a device work list", what);
}

// Chunks and paths are filled; assigns partials, work items and merge lists.
// A chunk is chunk-first when its coverage exceeds tau (0x0BD).
Status assign_work(AttentionWorkPlan& plan, const std::vector<std::vector<uint32_t>>& paths, uint32_t tau) {
  std::vector<uint64_t> first_partial(plan.chunks.size());
  uint64_t next = 0;
  const uint32_t part = plan.partition_tokens;
  for (uint32_t c = 0; c < plan.chunks.size(); ++c) {
    const PlanChunk& chunk = plan.chunks[c];
    const uint32_t coverage = chunk.coverage_end - chunk.coverage_begin;
    const uint32_t partitions = (chunk.tokens + part - 1) / part;
    first_partial[c] = next;
    for (uint32_t p = 0; p < partitions; ++p) {
      const uint32_t key_begin = p * part;
      const uint32_t key_count = std::min(part, chunk.tokens - key_begin);
      const uint64_t row = next + uint64_t{p} * coverage;  // partial of the chunk's first sequence
      if (coverage > tau) {
        for (uint32_t s = 0; s < coverage; s += plan.tile_sequences) {
          const uint32_t n = std::min(plan.tile_sequences, coverage - s);
          plan.tile_items.push_back(
              PlanTileItem{c, key_begin, key_count, chunk.coverage_begin + s, n, static_cast<uint32_t>(row + s)});
        }
      } else {
        for (uint32_t s = 0; s < coverage; ++s)
          plan.sequence_items.push_back(
              PlanSequenceItem{c, chunk.coverage_begin + s, key_begin, key_count, static_cast<uint32_t>(row + s)});
      }
    }
    next += uint64_t{partitions} * coverage;
    if (next > std::numeric_limits<uint32_t>::max()) return too_large("partials");
  }
  plan.partial_count = static_cast<uint32_t>(next);
  plan.merge_offsets.assign(1, 0);
  for (uint32_t s = 0; s < paths.size(); ++s) {
    for (uint32_t c : paths[s]) {
      const PlanChunk& chunk = plan.chunks[c];
      const uint32_t partitions = (chunk.tokens + part - 1) / part;
      for (uint32_t p = 0; p < partitions; ++p)
        plan.merge_partials.push_back(static_cast<uint32_t>(
            first_partial[c] + uint64_t{p} * (chunk.coverage_end - chunk.coverage_begin) + (s - chunk.coverage_begin)));
    }
    plan.merge_offsets.push_back(static_cast<uint32_t>(plan.merge_partials.size()));
  }
  plan.sequences = static_cast<uint32_t>(paths.size());
  return Status::success();
}

Result<uint32_t> partition_tokens_for(uint32_t requested, uint32_t kernel_block_tokens) {
  if (requested == 0) return kDefaultPartitionTokens;
  if (requested % kernel_block_tokens != 0)
    return make_error(ErrorCode::invalid_argument,
                      "partition of " + std::to_string(requested) + " keys is not a multiple of P_k = " +
                          std::to_string(kernel_block_tokens) + " (0x0A: N_blocks/part = P_part / P_k)",
                      "partition_tokens");
  return requested;
}

uint32_t tile_sequences_for(uint32_t requested, const HeadMapping& heads) {
  if (requested != 0) return requested;
  return std::max(1u, kDefaultTileRows / heads.group_size());
}

// An empty plan with P_k, P_part and the tile width resolved and checked.
Result<AttentionWorkPlan> start_plan(const PagedKvView& view, const HeadMapping& heads,
                                     const WorkPlanOptions& options) {
  auto pk = kernel_block_tokens_for(view, options.kernel_block_tokens);
  if (!pk.ok()) return pk.error();
  auto part = partition_tokens_for(options.partition_tokens, *pk);
  if (!part.ok()) return part.error();
  AttentionWorkPlan plan;
  plan.kernel_block_tokens = *pk;
  plan.partition_tokens = *part;
  plan.tile_sequences = tile_sequences_for(options.tile_sequences, heads);
  return plan;
}

}  // namespace

uint64_t AttentionWorkPlan::key_rows_read() const {
  uint64_t rows = 0;
  for (const PlanSequenceItem& i : sequence_items) rows += i.key_count;
  for (const PlanTileItem& i : tile_items) rows += i.key_count;
  return rows;
}

Result<AttentionWorkPlan> plan_paged_decode(const PagedKvView& view, const HeadMapping& heads,
                                            std::span<const DecodeRequest> requests, const WorkPlanOptions& options) {
  KVRT_TRY(check_head_mapping(heads, view.kv_heads, "heads"));
  if (requests.empty()) return make_error(ErrorCode::invalid_argument, "no decode request", "requests");
  auto started = start_plan(view, heads, options);
  if (!started.ok()) return started.error();
  AttentionWorkPlan plan = std::move(started).value();
  const uint32_t pk = plan.kernel_block_tokens;
  std::vector<std::vector<uint32_t>> paths;
  for (uint32_t r = 0; r < requests.size(); ++r) {
    const KvBlockTable& table = requests[r].table;
    KVRT_TRY(check_block_table(table, view, pk, "requests[" + std::to_string(r) + "]"));
    if (table.context_tokens > std::numeric_limits<uint32_t>::max()) return too_large("context_tokens");
    const uint32_t tokens = static_cast<uint32_t>(table.context_tokens);
    PlanChunk chunk{static_cast<uint32_t>(plan.runs.size()), 0, tokens, r, r + 1};
    for (uint32_t key = 0, j = 0; key < tokens; key += view.block_tokens, ++j)
      plan.runs.push_back(PlanRowRun{table.slots[j], 0, std::min(view.block_tokens, tokens - key), key});
    chunk.run_count = static_cast<uint32_t>(plan.runs.size()) - chunk.run_begin;
    paths.push_back({static_cast<uint32_t>(plan.chunks.size())});
    plan.chunks.push_back(chunk);
  }
  KVRT_TRY(assign_work(plan, paths, /*tau=*/1));
  return plan;
}

Result<AttentionWorkPlan> plan_shared_prefix(const PagedKvView& view, const ExecutionSnapshot& snapshot,
                                             const SnapshotFence& fence, const HeadMapping& heads,
                                             const WorkPlanOptions& options) {
  KVRT_TRY(snapshot.validate_for(view, fence, heads));
  auto started = start_plan(view, heads, options);
  if (!started.ok()) return started.error();
  AttentionWorkPlan plan = std::move(started).value();
  for (const SnapshotChunk& c : snapshot.chunks) {
    if (c.tokens() > std::numeric_limits<uint32_t>::max()) return too_large("chunk tokens");
    PlanChunk chunk{static_cast<uint32_t>(plan.runs.size()), 0, static_cast<uint32_t>(c.tokens()), c.coverage_begin,
                    c.coverage_end};
    uint32_t key = 0;
    for (const KvRowRun& r : c.runs) {
      if (r.rows == 0) continue;  // a device search over runs needs every run non-empty
      plan.runs.push_back(PlanRowRun{r.slot, r.first_row, r.rows, key});
      key += r.rows;
    }
    chunk.run_count = static_cast<uint32_t>(plan.runs.size()) - chunk.run_begin;
    plan.chunks.push_back(chunk);
  }
  std::vector<std::vector<uint32_t>> paths;
  for (const SnapshotSequence& s : snapshot.sequences) paths.push_back(s.path);
  KVRT_TRY(assign_work(plan, paths, snapshot.contract.shared_threshold));
  return plan;
}

}  // namespace kvrt::executor
