#include "services/executor/chunk_attention.hpp"

#include <cmath>
#include <memory>
#include <vector>

#include "services/executor/attention_workers.hpp"

namespace kvrt::executor {

ChunkFirstMetadata build_chunk_first_metadata(const ExecutionSnapshot& s) {
  ChunkFirstMetadata md;
  for (uint32_t c = 0; c < s.chunks.size(); ++c) {
    const SnapshotChunk& chunk = s.chunks[c];
    if (chunk.coverage() <= s.contract.shared_threshold) continue;
    md.chunk.push_back(c);
    md.begins.push_back(chunk.coverage_begin);
    md.ends.push_back(chunk.coverage_end);
    md.offsets.push_back(md.partial_rows);
    md.partial_rows += chunk.coverage();
  }
  return md;
}

namespace {

template <class T>
Result<SharedPrefixReceipt> chunk_attention_impl(const PagedKvView& view, const SharedPrefixArgsT<T>& a,
                                                 ThreadPool* pool, Workspace* workspace) {
  KVRT_TRY(check_shared_prefix_args(view, a));
  const ExecutionSnapshot& s = *a.snapshot;
  const uint32_t batch = static_cast<uint32_t>(s.sequences.size());
  const uint32_t hq = a.heads.q_heads, group = a.heads.group_size();
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  const ChunkFirstMetadata md = build_chunk_first_metadata(s);
  std::vector<int64_t> entry_of(s.chunks.size(), -1);  // chunk -> metadata entry, -1: sequence-first
  for (uint64_t e = 0; e < md.chunk.size(); ++e) entry_of[md.chunk[e]] = static_cast<int64_t>(e);
  // Partial buffer: row (offset + i) x query head, as the pinned source's
  // attns [partial_rows, H_q, d_v] and maxsums [2, partial_rows, H_q].
  // Every materialised row is written by the chunk-first phase before the
  // sequence-first phase reads it.
  Workspace local;
  PartialBuffer<T> partial =
      PartialBuffer<T>::take(workspace != nullptr ? *workspace : local, md.partial_rows * hq, dv);

  ThreadPool inline_pool(1);
  ThreadPool& threads = pool != nullptr ? *pool : inline_pool;
  struct Scratch {
    RowsWorker<T> rows;
    TileWorker<T> tile;
    std::vector<const T*> q_rows;
    PartialStates<T> merged;
  };
  std::vector<std::unique_ptr<Scratch>> scratch(threads.workers());
  for (auto& w : scratch) w = std::make_unique<Scratch>();
  const T scale = T(1) / std::sqrt(T(dk));
  SharedPrefixReceipt receipt;
  receipt.snapshot_digest = s.digest();
  receipt.ledger = shared_prefix_ledger(s, ledger_widths<T>(view));
  receipt.partial_states = md.partial_rows * hq;

  // Chunk-first phase: one batched product per (materialised chunk, K/V head).
  threads.parallel_for(md.chunk.size() * view.kv_heads, [&](std::size_t item, unsigned wi) {
    const uint64_t e = item / view.kv_heads;
    const uint32_t h = static_cast<uint32_t>(item % view.kv_heads);
    const SnapshotChunk& chunk = s.chunks[md.chunk[e]];
    const uint32_t cov = md.ends[e] - md.begins[e];
    Scratch& w = *scratch[wi];
    w.q_rows.resize(uint64_t{cov} * group);
    for (uint32_t i = 0; i < cov; ++i)
      for (uint32_t g = 0; g < group; ++g)
        w.q_rows[i * group + g] = a.queries.data() + ((uint64_t{md.begins[e]} + i) * hq + uint64_t{h} * group + g) * dk;
    w.tile.start(view, h, w.q_rows.data(), cov * group, scale, nullptr, chunk.first_position);
    for (const KvRowRun& r : chunk.runs) w.tile.feed(r.slot, r.first_row, r.rows);
    PartialStates<T>& st = w.tile.finish();
    for (uint32_t i = 0; i < cov; ++i)
      for (uint32_t g = 0; g < group; ++g)
        partial.store((md.offsets[e] + i) * hq + uint64_t{h} * group + g, st, i * group + g);
  });
  receipt.batched_chunks = md.chunk.size();

  // Sequence-first phase: per sequence, its private chunks in one pass over
  // every head, then the exact merge with its materialised partial states.
  threads.parallel_for(batch, [&](std::size_t item, unsigned wi) {
    const uint32_t q = static_cast<uint32_t>(item);
    const SnapshotSequence& seq = s.sequences[q];
    Scratch& w = *scratch[wi];
    const uint64_t first_q = uint64_t{q} * hq;
    w.rows.start(view, a.queries.data() + first_q * dk, hq, scale, 0);
    for (uint32_t c : seq.path)
      if (entry_of[c] < 0)
        for (const KvRowRun& r : s.chunks[c].runs) w.rows.feed(r.slot, r.first_row, r.rows);
    PartialStates<T>& priv = w.rows.finish();  // empty when the whole path was materialised
    w.merged.reset(hq, dv);
    for (uint32_t c : seq.path) {
      if (entry_of[c] < 0) continue;
      const uint64_t e = static_cast<uint64_t>(entry_of[c]);
      for (uint32_t j = 0; j < hq; ++j) {
        StateRef<T> src = partial.row((md.offsets[e] + (q - md.begins[e])) * hq + j);
        merge_state(w.merged.row(j), *src.valid, *src.m, *src.l, src.u, dv);
      }
    }
    for (uint32_t j = 0; j < hq; ++j) {
      merge_state(w.merged.row(j), priv.valid[j], priv.m[j], priv.l[j], &priv.u[uint64_t{j} * dv], dv);
      KVRT_ASSERT(w.merged.valid[j] == seq.context_tokens, "ChunkAttention merged a key count other than the frontier");
      finalize_state(w.merged.valid[j], w.merged.m[j], w.merged.l[j], &w.merged.u[uint64_t{j} * dv], dv,
                     a.outputs.data() + (first_q + j) * dv, a.lse.empty() ? nullptr : a.lse.data() + first_q + j);
    }
  });
  return receipt;
}

}  // namespace

Result<SharedPrefixReceipt> chunk_attention(const PagedKvView& view, const SharedPrefixArgs& args, ThreadPool* pool,
                                            Workspace* workspace) {
  return chunk_attention_impl(view, args, pool, workspace);
}
Result<SharedPrefixReceipt> chunk_attention(const PagedKvView& view, const SharedPrefixArgs64& args, ThreadPool* pool,
                                            Workspace* workspace) {
  return chunk_attention_impl(view, args, pool, workspace);
}

}  // namespace kvrt::executor
