// Shared-prefix decode through the node's executor owner (0x0BA-0x0BD):
// the worker computes each layer's queries, the node attends the members'
// committed rows with the prefix tree it builds from their own block tables
// (a worker names requests, never blocks, 0x0BH), and the worker merges each
// new row (ReferenceModel::forward_decode_merged). One ExecuteBatch per
// layer. See engine_loop.hpp.
#include <algorithm>

#include "engine/engine_loop.hpp"

namespace kvrt::engine {

Result<std::optional<std::vector<std::vector<float>>>> EngineLoop::decode_on_node(
    const model::ReferenceModel& model, const std::vector<LiveRequest*>& writing, const std::vector<size_t>& members) {
  std::vector<model::ForwardChunk> chunks;
  SharedPrefixDecodeOp op;
  for (size_t i : members) {
    const LiveRequest& r = *writing[i];
    chunks.push_back(model::ForwardChunk{&r.blocks, r.tokens, r.cached_rows});
    // The committed rows only: the decode row is written but not committed
    // until the step ends, and the worker merges it itself.
    op.members.push_back(SharedDecodeRequest{r.fence.request, r.fence.table_version, r.cached_rows});
  }
  op.design = o_.shared_prefix_design;
  uint64_t rows_read = 0, rows_per_request = 0;
  std::optional<Error> refused;  // the node's typed answer to an op: decoded here instead
  auto committed = [&](uint32_t layer, std::span<const float> queries, std::span<float> outputs,
                       std::span<float> lse) -> Status {
    const size_t q_heads = lse.size() / members.size();
    op.layer = layer;
    op.q_heads = static_cast<uint32_t>(q_heads);
    op.queries.assign(queries.begin(), queries.end());
    ExecuteBatch batch{next_trace(), {}, {op}};
    auto receipt = session_->executor(batch);
    if (!receipt.ok()) return receipt.error();
    if (receipt->shared_outcomes.size() != 1)
      return make_error(
          ErrorCode::invariant_violated,
          "an execute receipt answers " + std::to_string(receipt->shared_outcomes.size()) + " shared ops, not 1",
          "shared_outcomes");
    if (const auto* e = std::get_if<Error>(&receipt->shared_outcomes[0])) {
      refused = *e;
      return *e;
    }
    const SharedPrefixOutput& out = std::get<SharedPrefixOutput>(receipt->shared_outcomes[0]);
    const size_t d = queries.size() / lse.size();
    for (size_t k = 0; k < members.size(); ++k) {
      const AttentionOutput& a = out.outputs.at(k);
      if (a.request != op.members[k].request || a.outputs.size() != q_heads * d || a.lse.size() != q_heads ||
          a.context_tokens != op.members[k].context_tokens)
        return make_error(ErrorCode::invariant_violated,
                          "the node's output " + std::to_string(k) + " does not answer request " +
                              std::to_string(op.members[k].request.value) + "'s " +
                              std::to_string(op.members[k].context_tokens) + " committed rows",
                          "outputs");
      std::copy(a.outputs.begin(), a.outputs.end(), outputs.begin() + static_cast<ptrdiff_t>(k * q_heads * d));
      std::copy(a.lse.begin(), a.lse.end(), lse.begin() + static_cast<ptrdiff_t>(k * q_heads));
    }
    ++result_.node_shared_ops;
    switch (out.design) {
      case SharedPrefixDesign::hydragen:
        ++result_.node_shared_hydragen;
        break;
      case SharedPrefixDesign::chunk_attention:
        ++result_.node_shared_chunk_attention;
        break;
      default:
        ++result_.node_shared_per_request;
        break;
    }
    result_.node_shared_max_levels = std::max<uint64_t>(result_.node_shared_max_levels, out.levels);
    if (out.levels > 1) ++result_.node_shared_multi_level;
    if (layer == 0) {
      rows_read = out.rows_read;
      rows_per_request = out.rows_per_request;
    }
    return Status::success();
  };
  auto logits = model.forward_decode_merged(*shared_, chunks, committed);
  if (!logits.ok()) {
    if (!refused) return logits.error();
    note_error(*refused);
    ++result_.node_shared_refusals;
    return std::optional<std::vector<std::vector<float>>>{};
  }
  result_.node_shared_rows_read += rows_read;
  result_.node_shared_rows_per_request += rows_per_request;
  // Per layer the node read rows_read committed rows; the merge read each new row.
  result_.decode_kv_bytes_read += (rows_read + members.size()) * row_bytes_;
  ++result_.shared_prefix_batches;
  return std::optional<std::vector<std::vector<float>>>(std::move(logits).value());
}

}  // namespace kvrt::engine
