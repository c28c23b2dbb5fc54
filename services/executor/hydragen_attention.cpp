#include "services/executor/hydragen_attention.hpp"

#include <cmath>
#include <memory>
#include <vector>

#include "services/executor/attention_workers.hpp"

namespace kvrt::executor {
namespace {

template <class T>
Result<SharedPrefixReceipt> hydragen_impl(const PagedKvView& view, const SharedPrefixArgsT<T>& a, ThreadPool* pool,
                                          Workspace* workspace) {
  KVRT_TRY(check_shared_prefix_args(view, a));
  const ExecutionSnapshot& s = *a.snapshot;
  const uint32_t batch = static_cast<uint32_t>(s.sequences.size());
  const uint32_t hq = a.heads.q_heads, group = a.heads.group_size();
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;

  // Partition p = (sequence, path position) owns one (O, LSE) per query head.
  std::vector<uint64_t> path_base(batch + 1, 0);
  for (uint32_t q = 0; q < batch; ++q) path_base[q + 1] = path_base[q] + s.sequences[q].path.size();
  const uint64_t partitions = path_base[batch];
  // partition_of[cov_base[c] + i] = partition of chunk c for its i-th covered sequence.
  std::vector<uint64_t> cov_base(s.chunks.size() + 1, 0);
  for (uint64_t c = 0; c < s.chunks.size(); ++c) cov_base[c + 1] = cov_base[c] + s.chunks[c].coverage();
  std::vector<uint64_t> partition_of(cov_base.back());
  for (uint32_t q = 0; q < batch; ++q)
    for (uint64_t k = 0; k < s.sequences[q].path.size(); ++k) {
      const uint32_t c = s.sequences[q].path[k];
      partition_of[cov_base[c] + (q - s.chunks[c].coverage_begin)] = path_base[q] + k;
    }
  // Every (partition, head) cell is written in phase 1 before phase 2 reads it.
  Workspace local;
  Workspace& ws = workspace != nullptr ? *workspace : local;
  const std::span<T> part_o = ws.take<T>(Workspace::Slot::u, partitions * hq * dv);
  const std::span<T> part_lse = ws.take<T>(Workspace::Slot::lse, partitions * hq);
  const std::span<uint64_t> part_valid = ws.take<uint64_t>(Workspace::Slot::valid, partitions * hq);

  ThreadPool inline_pool(1);
  ThreadPool& threads = pool != nullptr ? *pool : inline_pool;
  struct Scratch {
    RowsWorker<T> rows;
    TileWorker<T> tile;
    std::vector<const T*> q_rows;
  };
  std::vector<std::unique_ptr<Scratch>> scratch(threads.workers());
  for (auto& w : scratch) w = std::make_unique<Scratch>();
  const T scale = T(1) / std::sqrt(T(dk));
  SharedPrefixReceipt receipt;
  receipt.snapshot_digest = s.digest();
  receipt.ledger = shared_prefix_ledger(s, ledger_widths<T>(view));
  for (const SnapshotChunk& c : s.chunks) receipt.batched_chunks += c.coverage() > 1 ? 1 : 0;
  receipt.partial_states = partitions * hq;

  // Phase 1: a shared chunk is one batched product per K/V head; a chunk of
  // one sequence is one item over all its heads (too few rows to batch).
  struct ChunkItem {
    uint32_t chunk;
    uint32_t kv_head;  // kAllHeads: every head, rows kernel
  };
  constexpr uint32_t kAllHeads = UINT32_MAX;
  std::vector<ChunkItem> items;
  for (uint32_t c = 0; c < s.chunks.size(); ++c) {
    if (s.chunks[c].coverage() == 1) {
      items.push_back({c, kAllHeads});
      continue;
    }
    for (uint32_t h = 0; h < view.kv_heads; ++h) items.push_back({c, h});
  }
  threads.parallel_for(items.size(), [&](std::size_t item, unsigned wi) {
    const uint32_t c = items[item].chunk;
    const SnapshotChunk& chunk = s.chunks[c];
    const uint32_t cov = chunk.coverage();
    Scratch& w = *scratch[wi];
    // Row (i, j) of the item's states: covered sequence i, query head j.
    auto emit = [&](const PartialStates<T>& st, uint32_t i, uint32_t head, uint32_t row) {
      const uint64_t cell = partition_of[cov_base[c] + i] * hq + head;
      part_valid[cell] = st.valid[row];
      finalize_state(st.valid[row], st.m[row], st.l[row], &st.u[uint64_t{row} * dv], dv, part_o.data() + cell * dv,
                     part_lse.data() + cell);
    };
    if (items[item].kv_head == kAllHeads) {
      w.rows.start(view, a.queries.data() + uint64_t{chunk.coverage_begin} * hq * dk, hq, scale, chunk.first_position);
      for (const KvRowRun& r : chunk.runs) w.rows.feed(r.slot, r.first_row, r.rows);
      const PartialStates<T>& st = w.rows.finish();
      for (uint32_t j = 0; j < hq; ++j) emit(st, 0, j, j);
      return;
    }
    const uint32_t h = items[item].kv_head;
    w.q_rows.resize(uint64_t{cov} * group);
    for (uint32_t i = 0; i < cov; ++i)
      for (uint32_t g = 0; g < group; ++g)
        w.q_rows[i * group + g] =
            a.queries.data() + ((uint64_t{chunk.coverage_begin} + i) * hq + uint64_t{h} * group + g) * dk;
    w.tile.start(view, h, w.q_rows.data(), cov * group, scale, nullptr, chunk.first_position);
    for (const KvRowRun& r : chunk.runs) w.tile.feed(r.slot, r.first_row, r.rows);
    const PartialStates<T>& st = w.tile.finish();
    for (uint32_t i = 0; i < cov; ++i)
      for (uint32_t g = 0; g < group; ++g) emit(st, i, h * group + g, i * group + g);
  });

  // Phase 2: merge each sequence's partitions in (O, LSE) coordinates.
  threads.parallel_for(uint64_t{batch} * hq, [&](std::size_t item, unsigned) {
    const uint64_t q = item / hq, head = item % hq;
    const uint64_t count = path_base[q + 1] - path_base[q];
    std::vector<const T*> outs(count);
    std::vector<T> lses(count);
    std::vector<uint64_t> valid(count);
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t cell = (path_base[q] + k) * hq + head;
      outs[k] = part_o.data() + cell * dv;
      lses[k] = part_lse[cell];
      valid[k] = part_valid[cell];
    }
    const uint64_t keys = merge_lse(static_cast<uint32_t>(count), outs.data(), lses.data(), valid.data(), dv,
                                    a.outputs.data() + item * dv, a.lse.empty() ? nullptr : a.lse.data() + item);
    KVRT_ASSERT(keys == s.sequences[q].context_tokens, "Hydragen merged a key count other than the frontier");
  });
  return receipt;
}

}  // namespace

Result<SharedPrefixReceipt> hydragen_attention(const PagedKvView& view, const SharedPrefixArgs& args, ThreadPool* pool,
                                               Workspace* workspace) {
  return hydragen_impl(view, args, pool, workspace);
}
Result<SharedPrefixReceipt> hydragen_attention(const PagedKvView& view, const SharedPrefixArgs64& args,
                                               ThreadPool* pool, Workspace* workspace) {
  return hydragen_impl(view, args, pool, workspace);
}

}  // namespace kvrt::executor
