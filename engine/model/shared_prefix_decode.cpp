// ReferenceModel::forward_shared_prefix(): decode over one physically shared
// document with Hydragen (spec 0x0BC), for `kvrt run`'s many questions over
// one long document. Everything but attention is forward()'s row stages
// (forward_rows.hpp); attention of layer l reads the group's shared blocks
// once for the whole batch:
//
//   chunk 0  "shared"      rows [0, S) of the shared slots, coverage [0, B)
//   chunk 1+c "private c"  rows [S, T_c) of sequence c's own blocks, coverage [c, c+1)
//   sequence c             path {0, 1+c}, context T_c       (S = shared_rows)
//
// Hydragen batches the B x G query rows of each K/V head into one tile
// product over chunk 0, runs each private chunk with the rows kernel, and
// merges each row's two (O, LSE) partitions (0x0BA). The layers of one cache
// group share its tables, heads, widths and dtypes (0x01A), so the snapshot is
// built once per group and executed once per layer of the group.
//
// Exactness against forward() (measured by tests/model_shared_prefix_test.cpp).
// Both compute the same real-arithmetic row: the partitions tile [0, T_c)
// exactly once and the merge is exact in real arithmetic. They round
// differently in binary32:
//   - forward()'s tile kernel folds keys [0, T_c) into one online-softmax
//     state in 64-key windows and divides once (O = u / l);
//   - here the shared state is finalised to (O_s, LSE_s) = (u/l, m + log l),
//     the private rows go through the rows kernel (16-key windows, another
//     summation order), and the merge rounds exp(LSE - LSE*), the weighted
//     sum and one more division.
// Each is within 1e-5 row-relative of the FP64 attention over the same stored
// rows (attention_args.hpp), and in practice a few binary32 ulps apart. Those
// differences then cross the fp16 store of the next layers' K/V rows. The
// binary32 K/V values differ by about 1e-6 of the row's scale; two values
// closer than one fp16 ulp round to the same or adjacent fp16 values, so a
// scalar at the row's scale differs by at most one fp16 ulp, while a scalar
// far below it (cancellation in the projection) keeps the same tiny absolute
// difference over a smaller ulp and may land a few of its ulps away. Both
// fit canonical_row_difference <= 2^-10 (one ulp over |b| for 1 <= |b| < 2,
// absolute below 1). Layer 0's rows see no attention and are bitwise equal.
// A later step attends over rows that may differ by such an ulp, which moves
// its scores by about 2^-11 |q||k| / sqrt(d) per differing scalar times that
// key's softmax weight: again far below an fp16 ulp of the next rows.
//
// Measured (small-two-group layout, fp16 K/V, binary32 accumulation): over a
// sweep of 24 seeds, documents of 32..784 rows, 2..8 sequences, 32 decode
// steps (3744 sequence-steps), the worst logit difference was 2.2e-6 of
// max |logit| (4.4e-7 at the first step, before any row differs: a few
// binary32 ulps of the largest logit), the worst K/V row difference 9.5e-4
// (one fp16 ulp of a value just above 1; 13% of the new group rows were not
// bitwise equal; of 1053 differing scalars, 41 were 2 or 3 ulps apart, all
// with |b| < 4e-4, where an fp16 ulp is 2^-22 or less), and no greedy token
// changed. The [model] suite asserts rows <= 2^-10, at most one fp16 ulp
// apart for scalars of magnitude >= 1/16, and logits <= 2^-15 of
// max |logit| (tests/model_shared_prefix_test.cpp, which prints its own worst
// figures); greedy tokens can differ only at a near-tie closer than that bound.
//
// Batch and thread invariance. Hydragen's items are whole (chunk, K/V head)
// products and whole (sequence, query head) merges; the tile kernel treats
// each query row as its own column (reference_model.cpp), so a sequence's
// bits depend on its own tokens and on S, not on the other sequences or on
// the thread count.
#include <algorithm>
#include <string>
#include <utility>

#include "services/common/assert.hpp"
#include "services/common/digest.hpp"
#include "services/executor/execution_snapshot.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/workspace.hpp"
#include "engine/model/forward_plan.hpp"
#include "engine/model/forward_rows.hpp"
#include "engine/model/reference_model.hpp"

namespace kvrt::model {
namespace {

std::string chunk_field(size_t c) { return "chunks[" + std::to_string(c) + "]"; }

// The checks forward_shared_prefix() adds to forward()'s (the plan has
// already checked tables, lengths and slots, so blocks [0, S / P_a) exist).
Status check_shared_prefix(const CacheLayoutManifest& layout, std::span<const ForwardChunk> chunks,
                           uint32_t shared_rows) {
  const uint32_t p_a = layout.allocator_block_size;
  if (chunks.size() < 2)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(chunks.size()) + " chunks: a shared prefix needs at least 2 sequences", "chunks");
  for (size_t c = 0; c < chunks.size(); ++c)
    if (uint64_t{chunks[c].first_row} + 1 != chunks[c].tokens.size())
      return make_error(ErrorCode::invalid_argument,
                        "first_row " + std::to_string(chunks[c].first_row) + " of a sequence of " +
                            std::to_string(chunks[c].tokens.size()) + " tokens is not a single decode row",
                        chunk_field(c) + ".first_row");
  if (shared_rows == 0 || shared_rows % p_a != 0)
    return make_error(ErrorCode::invalid_argument,
                      "shared_rows " + std::to_string(shared_rows) + " is not a positive multiple of P_a = " +
                          std::to_string(p_a) + " (sequences share whole blocks)",
                      "shared_rows");
  for (size_t c = 0; c < chunks.size(); ++c)
    if (shared_rows > chunks[c].first_row)
      return make_error(ErrorCode::invalid_argument,
                        "shared_rows " + std::to_string(shared_rows) + " exceeds the " +
                            std::to_string(chunks[c].first_row) + " cached rows before " + chunk_field(c) +
                            "'s decode row",
                        "shared_rows");
  const uint32_t shared_blocks = shared_rows / p_a;
  for (size_t g = 0; g < layout.cache_groups.size(); ++g)
    for (size_t c = 1; c < chunks.size(); ++c)
      for (uint32_t j = 0; j < shared_blocks; ++j) {
        const uint32_t mine = chunks[c].blocks->slots[g][j], first = chunks[0].blocks->slots[g][j];
        if (mine != first)
          return make_error(ErrorCode::incompatible,
                            chunk_field(c) + ".blocks.slots[" + std::to_string(g) + "][" + std::to_string(j) +
                                "] is slot " + std::to_string(mine) + ", chunks[0]'s is " + std::to_string(first) +
                                ": the first " + std::to_string(shared_rows) + " rows are not physically shared",
                            "shared_rows");
      }
  return Status::success();
}

// A chunk of consecutive rows [from, to) of a table whose blocks hold
// valid_rows rows each (the plan's committed rows after this call's writes).
executor::SnapshotChunk table_chunk(std::string name, std::span<const uint32_t> slots,
                                    std::span<const uint32_t> valid_rows, uint32_t from, uint32_t to, uint32_t p_a) {
  executor::SnapshotChunk chunk;
  chunk.name = std::move(name);
  chunk.first_position = from;
  CanonicalWriter id("kvrt.model.shared_prefix_chunk.v1");
  id.str("name", chunk.name).u32("from", from).u32("to", to);
  for (uint32_t j = from / p_a; j * p_a < to; ++j) {
    const uint32_t begin = std::max(from, j * p_a) - j * p_a, end = std::min(to, (j + 1) * p_a) - j * p_a;
    chunk.runs.push_back(executor::KvRowRun{slots[j], begin, end - begin, valid_rows[j]});
    id.u32("slot", slots[j]);
  }
  // The rows' identity is their physical place: this call owns them until it returns.
  chunk.identity = id.finish();
  return chunk;
}

// The snapshot of group g: chunk 0 shared, chunk 1 + c private to sequence c.
executor::ExecutionSnapshot group_snapshot(const LayerShape& ls, const executor::PagedKvView& view,
                                           std::span<const ForwardChunk> chunks, const ForwardPlan& plan,
                                           uint32_t shared_rows, uint32_t p_a) {
  const uint32_t g = ls.group_index;
  executor::ExecutionSnapshot s;
  s.contract = executor::ExecutionContract{
      executor::HeadMapping{ls.q_heads, ls.kv_heads}, ls.head_dim, ls.head_dim, view.k.dtype, view.v.dtype, 1};
  s.chunks.push_back(table_chunk("shared", chunks[0].blocks->slots[g], plan.valid_rows[g][0], 0, shared_rows, p_a));
  s.chunks[0].coverage_begin = 0;
  s.chunks[0].coverage_end = static_cast<uint32_t>(chunks.size());
  CanonicalWriter tree("kvrt.model.shared_prefix_tree.v1");
  tree.u32("group", g).digest("shared", s.chunks[0].identity);
  for (uint32_t c = 0; c < chunks.size(); ++c) {
    const uint32_t context = static_cast<uint32_t>(chunks[c].tokens.size());
    s.chunks.push_back(table_chunk("private " + std::to_string(c), chunks[c].blocks->slots[g], plan.valid_rows[g][c],
                                   shared_rows, context, p_a));
    s.chunks.back().coverage_begin = c;
    s.chunks.back().coverage_end = c + 1;
    s.sequences.push_back(executor::SnapshotSequence{RequestId{c}, TableVersion{0}, context, {0, c + 1}});
    tree.digest("private", s.chunks.back().identity);
  }
  // Planned and executed inside one call over rows the caller owns, so the
  // fence is self-consistent by construction; the digest still names every
  // row run, so a receipt identifies what was read.
  s.tree_version = 0;
  s.tree_state_digest = tree.finish();
  return s;
}

}  // namespace

Result<std::vector<std::vector<float>>> ReferenceModel::forward_shared_prefix(ModelKvCache& cache,
                                                                              std::span<const ForwardChunk> chunks,
                                                                              uint32_t shared_rows,
                                                                              SharedPrefixReads* reads) const {
  const ModelShape& shape = weights_->shape;
  KVRT_TRY(check_model_cache(shape, layout_, cache));
  ForwardPlan plan;
  KVRT_TRY_ASSIGN(plan, plan_forward(layout_, config_.vocab, cache.slot_count(), chunks));
  KVRT_TRY(check_shared_prefix(layout_, chunks, shared_rows));

  const uint32_t p_a = layout_.allocator_block_size;
  std::vector<executor::ExecutionSnapshot> snapshots(layout_.cache_groups.size());
  std::vector<bool> built(snapshots.size(), false);
  for (uint32_t layer = 0; layer < shape.layers.size(); ++layer) {
    const LayerShape& ls = shape.layers[layer];
    if (!built[ls.group_index])
      snapshots[ls.group_index] = group_snapshot(ls, cache.layer_view(layer), chunks, plan, shared_rows, p_a);
    built[ls.group_index] = true;
    // Every argument is checked; a snapshot the executor would refuse is a kvrt bug.
    const executor::ExecutionSnapshot& s = snapshots[ls.group_index];
    const Status ok = s.validate_for(cache.layer_view(layer), s.fence(), s.contract.heads);
    KVRT_ASSERT(ok.ok(), "shared-prefix snapshot of checked arguments is invalid: " + ok.error().describe());
  }
  uint64_t private_rows = 0;  // per layer [rows]
  for (const ForwardChunk& c : chunks) private_rows += c.tokens.size() - shared_rows;

  // Nothing is written above this line; below, every argument has been checked.
  SharedPrefixReads counted;
  executor::Workspace workspace;  // Hydragen's partition buffers, reused by every layer
  RowPass pass(*weights_, layout_, *threads_, chunks, plan);
  pass.embed();
  for (uint32_t layer = 0; layer < shape.layers.size(); ++layer) {
    const LayerShape& ls = shape.layers[layer];
    const executor::ExecutionSnapshot& s = snapshots[ls.group_index];
    // 1. Q, K, V; the decode rows' K and V go into the cache first, since
    //    each private chunk ends with its own new row.
    pass.project_and_store(layer, cache);
    // 2. Hydragen: queries are [B][H_q][d_h] in chunk order, one row each.
    const executor::SharedPrefixArgs args{&s, s.fence(), s.contract.heads, pass.queries(layer), pass.attended(layer),
                                          {}};
    auto receipt = executor::hydragen_attention(cache.layer_view(layer), args, threads_.get(), &workspace);
    KVRT_ASSERT(receipt.ok(), "hydragen_attention refused checked arguments: " + receipt.error().describe());
    // The ledger counts shared and private rows alike; the private ones are
    // read once either way (0x0BE), so what remains is the shared chunk's.
    counted.shared_rows_read_once += receipt->ledger.unique_rows - private_rows;
    counted.shared_rows_per_request += receipt->ledger.logical_pairs - private_rows;
    // 3. Output projection, MLP, residuals.
    pass.finish_layer(layer);
  }
  if (reads != nullptr) *reads = counted;
  return pass.logits();
}

}  // namespace kvrt::model
