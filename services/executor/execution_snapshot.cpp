#include "services/executor/execution_snapshot.hpp"

#include <string>

namespace kvrt::executor {
namespace {

std::string indexed(const char* name, uint64_t i) {
  std::string s(name);
  s.append("[").append(std::to_string(i)).append("]");
  return s;
}

// Sequences reading each chunk, in sequence order.
std::vector<std::vector<uint32_t>> readers(const ExecutionSnapshot& s) {
  std::vector<std::vector<uint32_t>> out(s.chunks.size());
  for (uint32_t q = 0; q < s.sequences.size(); ++q)
    for (uint32_t c : s.sequences[q].path)
      if (c < s.chunks.size() && (out[c].empty() || out[c].back() != q)) out[c].push_back(q);
  return out;
}

}  // namespace

uint64_t SnapshotChunk::tokens() const {
  uint64_t t = 0;
  for (const KvRowRun& r : runs) t += r.rows;
  return t;
}

Sha256Digest ExecutionSnapshot::digest() const {
  CanonicalWriter w("kvrt.executor.execution_snapshot.v1");
  w.u64("tree_version", tree_version).digest("tree_state_digest", tree_state_digest);
  w.u32("q_heads", contract.heads.q_heads).u32("kv_heads", contract.heads.kv_heads);
  w.u32("qk_dim", contract.qk_dim).u32("v_dim", contract.v_dim);
  w.u8("k_dtype", uint8_t(contract.k_dtype)).u8("v_dtype", uint8_t(contract.v_dtype));
  w.u32("shared_threshold", contract.shared_threshold);
  w.begin_list("chunks", chunks.size());
  for (const SnapshotChunk& c : chunks) {
    w.str("name", c.name).digest("identity", c.identity).u64("first_position", c.first_position);
    w.u32("coverage_begin", c.coverage_begin).u32("coverage_end", c.coverage_end);
    w.begin_list("runs", c.runs.size());
    for (const KvRowRun& r : c.runs)
      w.u32("slot", r.slot).u32("first_row", r.first_row).u32("rows", r.rows).u32("valid_rows", r.valid_rows);
  }
  w.begin_list("sequences", sequences.size());
  for (const SnapshotSequence& q : sequences) {
    w.u64("request", q.request.value).u64("table_version", q.table_version.value);
    w.u64("context_tokens", q.context_tokens);
    w.begin_list("path", q.path.size());
    for (uint32_t c : q.path) w.u32("chunk", c);
  }
  return w.finish();
}

Status ExecutionSnapshot::validate() const {
  const uint64_t batch = sequences.size();
  for (uint64_t c = 0; c < chunks.size(); ++c) {
    const SnapshotChunk& ch = chunks[c];
    if (ch.tokens() == 0)
      return make_error(ErrorCode::invalid_argument, "chunk " + ch.name + " holds no rows",
                        indexed("chunks", c) + ".runs");
    if (ch.coverage_begin >= ch.coverage_end)
      return make_error(ErrorCode::executor_coverage_gap, "chunk " + ch.name + " covers no sequence",
                        indexed("chunks", c) + ".coverage");
    if (ch.coverage_end > batch)
      return make_error(ErrorCode::executor_coverage_overlap,
                        "chunk " + ch.name + " claims sequence " + std::to_string(ch.coverage_end - 1) +
                            " of a batch of " + std::to_string(batch),
                        indexed("chunks", c) + ".coverage_end");
  }
  // Each path tiles [0, frontier) exactly once, in order (0x0BA).
  for (uint64_t q = 0; q < batch; ++q) {
    const SnapshotSequence& seq = sequences[q];
    const std::string field = indexed("sequences", q);
    uint64_t next = 0;  // first position not yet covered
    for (uint64_t k = 0; k < seq.path.size(); ++k) {
      const uint32_t c = seq.path[k];
      if (c >= chunks.size())
        return make_error(ErrorCode::coordinate_out_of_range,
                          "path names chunk " + std::to_string(c) + " of " + std::to_string(chunks.size()),
                          field + indexed(".path", k));
      const SnapshotChunk& ch = chunks[c];
      if (ch.first_position < next)
        return make_error(ErrorCode::executor_coverage_overlap,
                          "chunk " + ch.name + " starts at position " + std::to_string(ch.first_position) +
                              " but positions up to " + std::to_string(next) + " are already covered",
                          field + indexed(".path", k));
      if (ch.first_position > next)
        return make_error(ErrorCode::executor_coverage_gap,
                          "positions [" + std::to_string(next) + ", " + std::to_string(ch.first_position) +
                              ") precede chunk " + ch.name + " and no chunk covers them",
                          field + indexed(".path", k));
      next += ch.tokens();
    }
    if (next > seq.context_tokens)
      return make_error(ErrorCode::executor_frontier_mismatch,
                        "the path reaches position " + std::to_string(next) + " past the sequence's frontier of " +
                            std::to_string(seq.context_tokens) + " tokens",
                        field + ".context_tokens");
    if (next < seq.context_tokens || next == 0)
      return make_error(ErrorCode::executor_coverage_gap,
                        "the path covers [0, " + std::to_string(next) + ") of a frontier of " +
                            std::to_string(seq.context_tokens) + " tokens",
                        field + ".path");
  }
  // Coverage intervals equal path membership (0x0BB).
  const auto read_by = readers(*this);
  for (uint64_t c = 0; c < chunks.size(); ++c) {
    const SnapshotChunk& ch = chunks[c];
    uint64_t expect = ch.coverage_begin;
    for (uint32_t q : read_by[c]) {
      if (q < ch.coverage_begin || q >= ch.coverage_end)
        return make_error(ErrorCode::executor_coverage_gap,
                          "sequence " + std::to_string(q) + " reads chunk " + ch.name + " outside its coverage [" +
                              std::to_string(ch.coverage_begin) + ", " + std::to_string(ch.coverage_end) + ")",
                          indexed("chunks", c) + ".coverage");
      if (q != expect)
        return make_error(ErrorCode::executor_coverage_overlap,
                          "coverage of chunk " + ch.name + " claims sequence " + std::to_string(expect) +
                              ", whose path does not contain it",
                          indexed("chunks", c) + ".coverage");
      ++expect;
    }
    if (expect != ch.coverage_end)
      return make_error(ErrorCode::executor_coverage_overlap,
                        "coverage of chunk " + ch.name + " claims sequence " + std::to_string(expect) +
                            ", whose path does not contain it",
                        indexed("chunks", c) + ".coverage");
  }
  return Status::success();
}

Status ExecutionSnapshot::validate_for(const PagedKvView& view, const SnapshotFence& expected,
                                       const HeadMapping& query_heads) const {
  if (expected.tree_version != tree_version)
    return make_error(ErrorCode::executor_stale_snapshot,
                      "planned against tree version " + std::to_string(expected.tree_version) +
                          ", snapshot is of version " + std::to_string(tree_version),
                      "tree_version");
  if (expected.tree_state_digest != tree_state_digest)
    return make_error(
        ErrorCode::executor_stale_snapshot,
        "tree-state digest " + tree_state_digest.hex() + " is not the planned " + expected.tree_state_digest.hex(),
        "tree_state_digest");
  KVRT_TRY(check_head_mapping(contract.heads, view.kv_heads, "contract.heads"));
  if (!(query_heads == contract.heads))
    return make_error(ErrorCode::executor_head_mapping,
                      "queries use H_q = " + std::to_string(query_heads.q_heads) +
                          ", H_kv = " + std::to_string(query_heads.kv_heads) +
                          " but the snapshot contracts H_q = " + std::to_string(contract.heads.q_heads) +
                          ", H_kv = " + std::to_string(contract.heads.kv_heads),
                      "contract.heads");
  if (contract.qk_dim != view.k.head_dim || contract.v_dim != view.v.head_dim)
    return make_error(ErrorCode::executor_shape_mismatch,
                      "contract widths d_qk = " + std::to_string(contract.qk_dim) +
                          ", d_v = " + std::to_string(contract.v_dim) + " but the pool holds " +
                          std::to_string(view.k.head_dim) + ", " + std::to_string(view.v.head_dim),
                      "contract.qk_dim");
  if (contract.k_dtype != view.k.dtype || contract.v_dtype != view.v.dtype)
    return make_error(ErrorCode::executor_shape_mismatch, "contract dtypes differ from the pool's", "contract.k_dtype");
  for (uint64_t c = 0; c < chunks.size(); ++c)
    for (uint64_t i = 0; i < chunks[c].runs.size(); ++i) {
      const KvRowRun& r = chunks[c].runs[i];
      const std::string field = indexed("chunks", c) + indexed(".runs", i);
      if (r.slot >= view.slot_count || r.valid_rows > view.block_tokens)
        return make_error(ErrorCode::coordinate_out_of_range,
                          "slot " + std::to_string(r.slot) + " with " + std::to_string(r.valid_rows) +
                              " valid rows is outside a pool of " + std::to_string(view.slot_count) + " blocks of " +
                              std::to_string(view.block_tokens),
                          field);
      if (uint64_t{r.first_row} + r.rows > r.valid_rows)
        return make_error(ErrorCode::row_not_valid,
                          "rows [" + std::to_string(r.first_row) + ", " + std::to_string(r.first_row + r.rows) +
                              ") of a block with " + std::to_string(r.valid_rows) +
                              " committed rows: the read would consume padding rows",
                          field);
    }
  return validate();
}

Status ExecutionSnapshot::assign_coverage() {
  const auto read_by = readers(*this);
  for (uint64_t c = 0; c < chunks.size(); ++c) {
    const auto& r = read_by[c];
    if (r.empty())
      return make_error(ErrorCode::executor_coverage_gap, "chunk " + chunks[c].name + " is read by no sequence",
                        indexed("chunks", c));
    if (r.back() - r.front() + 1 != r.size())
      return make_error(ErrorCode::executor_coverage_gap,
                        "the sequences reading chunk " + chunks[c].name +
                            " are not consecutive in sequence order; no interval describes them",
                        indexed("chunks", c));
    chunks[c].coverage_begin = r.front();
    chunks[c].coverage_end = r.back() + 1;
  }
  return Status::success();
}

}  // namespace kvrt::executor
