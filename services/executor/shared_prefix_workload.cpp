#include "services/executor/shared_prefix_workload.hpp"

#include <string>

#include "services/common/units.hpp"

namespace kvrt::executor {

std::vector<DecodeRequest> SharedPrefixWorkload::tables() const {
  std::vector<DecodeRequest> out(table_slots.size());
  for (size_t r = 0; r < out.size(); ++r)
    out[r].table = KvBlockTable{table_slots[r], table_valid[r], snapshot.sequences[r].context_tokens};
  return out;
}

Result<SharedPrefixWorkload> build_shared_prefix_workload(const SharedPrefixShape& shape) {
  if (shape.suffix_tokens.empty())
    return make_error(ErrorCode::invalid_argument, "a workload needs at least one sequence", "suffix_tokens");
  if (shape.prefix_tokens == 0 || shape.chunk_tokens == 0 || shape.block_tokens == 0)
    return make_error(ErrorCode::invalid_argument, "S, P_c and P_a must be positive", "prefix_tokens");
  SharedPrefixWorkload w;
  ExecutionSnapshot& s = w.snapshot;
  s.tree_version = shape.tree_version;
  s.contract = shape.contract;
  // A chunk of `tokens` rows at `position`, on fresh blocks.
  auto add_chunk = [&](std::string name, uint64_t position, uint32_t tokens) {
    SnapshotChunk c;
    c.identity = sha256(name + "@" + std::to_string(position) + "+" + std::to_string(tokens));
    c.name = std::move(name);
    c.first_position = position;
    for (uint32_t done = 0; done < tokens; done += shape.block_tokens) {
      const uint32_t rows = std::min(shape.block_tokens, tokens - done);
      c.runs.push_back(KvRowRun{w.slot_count++, 0, rows, rows});
    }
    s.chunks.push_back(std::move(c));
    return static_cast<uint32_t>(s.chunks.size() - 1);
  };
  std::vector<uint32_t> prefix_path;
  for (uint32_t p = 0; p < shape.prefix_tokens; p += shape.chunk_tokens)
    prefix_path.push_back(add_chunk("prefix." + std::to_string(p / shape.chunk_tokens), p,
                                    std::min(shape.chunk_tokens, shape.prefix_tokens - p)));
  for (uint32_t r = 0; r < shape.suffix_tokens.size(); ++r) {
    SnapshotSequence q;
    q.request = RequestId{r + 1};
    q.table_version = TableVersion{1};
    q.context_tokens = uint64_t{shape.prefix_tokens} + shape.suffix_tokens[r];
    q.path = prefix_path;
    const uint32_t u = shape.suffix_tokens[r];
    for (uint32_t p = 0; p < u; p += shape.chunk_tokens)
      q.path.push_back(add_chunk("suffix." + std::to_string(r) + "." + std::to_string(p / shape.chunk_tokens),
                                 shape.prefix_tokens + p, std::min(shape.chunk_tokens, u - p)));
    s.sequences.push_back(std::move(q));
  }
  KVRT_TRY(s.assign_coverage());
  CanonicalWriter tree("kvrt.executor.shared_prefix_workload.tree");
  tree.begin_list("chunks", s.chunks.size());
  for (const SnapshotChunk& c : s.chunks) tree.digest("identity", c.identity);
  s.tree_state_digest = tree.finish();
  KVRT_TRY(s.validate());

  // Ordinary block tables: the same blocks, concatenated along each path.
  bool aligned = true;
  for (const SnapshotSequence& q : s.sequences)
    for (size_t k = 0; k + 1 < q.path.size(); ++k)
      aligned = aligned && s.chunks[q.path[k]].tokens() % shape.block_tokens == 0;
  if (aligned)
    for (const SnapshotSequence& q : s.sequences) {
      std::vector<uint32_t> slots, valid;
      for (uint32_t c : q.path)
        for (const KvRowRun& run : s.chunks[c].runs) {
          slots.push_back(run.slot);
          valid.push_back(run.valid_rows);
        }
      w.table_slots.push_back(std::move(slots));
      w.table_valid.push_back(std::move(valid));
    }
  return w;
}

}  // namespace kvrt::executor
