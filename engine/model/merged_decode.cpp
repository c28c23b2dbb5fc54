// ReferenceModel::forward_decode_merged(): decode whose attention over the
// committed rows is computed by someone else (in `kvrt run`, the node's
// executor owner running Hydragen or ChunkAttention over the pools, 0x0BC,
// 0x0BD), and whose new row the model merges itself.
//
// Why the split: a worker decoding row T writes row T's K/V into its own
// block before attending, but commits it only after the step, so the node's
// table names rows [0, T) as committed. The node attends exactly those; the
// new row is one more partition of one key, merged exactly (0x0BA):
//   partition a: (O_a, LSE_a) from the node, valid = T keys
//   partition b: (v_T, s_T) with s_T = (q . k_T) / sqrt(d_h), valid = 1 key
//   O = (e^(LSE_a - L*) O_a + e^(s_T - L*) v_T) / (e^(LSE_a - L*) + e^(s_T - L*))
// with L* the larger of the two (executor::merge_lse, the same merge the
// shared-prefix kernels use between their chunks).
//
// Exactness: the real-arithmetic row equals forward()'s; in binary32 it is a
// different summation order (the node's chunks, one more merge), the same
// kind of difference shared_prefix_decode.cpp bounds, so `kvrt run` checks
// these rows within that bound and never publishes them.
#include <cmath>
#include <string>
#include <vector>

#include "engine/model/forward_plan.hpp"
#include "engine/model/forward_rows.hpp"
#include "engine/model/reference_model.hpp"
#include "services/executor/online_softmax.hpp"

namespace kvrt::model {
namespace {

Status check_merged_decode(std::span<const ForwardChunk> chunks) {
  for (size_t c = 0; c < chunks.size(); ++c)
    if (chunks[c].first_row == 0 || uint64_t{chunks[c].first_row} + 1 != chunks[c].tokens.size())
      return make_error(ErrorCode::invalid_argument,
                        "first_row " + std::to_string(chunks[c].first_row) + " of a sequence of " +
                            std::to_string(chunks[c].tokens.size()) +
                            " tokens is not a single decode row after committed rows",
                        "chunks[" + std::to_string(c) + "].first_row");
  return Status::success();
}

// Folds each chunk's new row (its last) into the committed partition held in
// `attended` and `lse`, in place. Rows are read back from the layer's view,
// widened exactly, so the key and value are the stored ones every later
// reader sees.
void merge_new_rows(const LayerShape& ls, const executor::PagedKvView& view, std::span<const ForwardChunk> chunks,
                    uint32_t p_a, std::span<const float> queries, std::span<float> attended,
                    std::span<const float> lse) {
  const uint32_t d = ls.head_dim, group = ls.q_heads / ls.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> k(d), v(d), merged(d);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const uint32_t row = chunks[c].first_row;
    const uint32_t slot = chunks[c].blocks->slots[ls.group_index][row / p_a], offset = row % p_a;
    for (uint32_t kv = 0; kv < ls.kv_heads; ++kv) {
      for (uint32_t x = 0; x < d; ++x) {
        k[x] = static_cast<float>(executor::load_element(view.k, slot, offset, kv, x));
        v[x] = static_cast<float>(executor::load_element(view.v, slot, offset, kv, x));
      }
      for (uint32_t h = kv * group; h < (kv + 1) * group; ++h) {
        const uint64_t q_at = (uint64_t{c} * ls.q_heads + h) * d;
        float score = 0.0f;
        for (uint32_t x = 0; x < d; ++x) score += queries[q_at + x] * k[x];
        score *= scale;
        const float* outputs[2] = {attended.data() + q_at, v.data()};
        const float lses[2] = {lse[uint64_t{c} * ls.q_heads + h], score};
        const uint64_t valid[2] = {row, 1};
        executor::merge_lse<float>(2, outputs, lses, valid, d, merged.data(), nullptr);
        std::copy(merged.begin(), merged.end(), attended.begin() + static_cast<ptrdiff_t>(q_at));
      }
    }
  }
}

}  // namespace

Result<std::vector<std::vector<float>>> ReferenceModel::forward_decode_merged(
    ModelKvCache& cache, std::span<const ForwardChunk> chunks, const CommittedAttention& committed) const {
  const ModelShape& shape = weights_->shape;
  KVRT_TRY(check_model_cache(shape, layout_, cache));
  ForwardPlan plan;
  KVRT_TRY_ASSIGN(plan, plan_forward(layout_, config_.vocab, cache.slot_count(), chunks));
  KVRT_TRY(check_merged_decode(chunks));
  if (chunks.empty()) return std::vector<std::vector<float>>{};

  // Nothing is written above this line; below, every argument has been checked.
  RowPass pass(*weights_, layout_, *threads_, chunks, plan);
  pass.embed();
  std::vector<float> lse;
  for (uint32_t layer = 0; layer < shape.layers.size(); ++layer) {
    const LayerShape& ls = shape.layers[layer];
    // 1. Q, K, V; the new rows' K and V go into the cache first.
    pass.project_and_store(layer, cache);
    // 2. The committed rows, attended elsewhere; then each new row merged.
    lse.assign(chunks.size() * ls.q_heads, 0.0f);
    KVRT_TRY(committed(layer, pass.queries(layer), pass.attended(layer), lse));
    merge_new_rows(ls, cache.layer_view(layer), chunks, layout_.allocator_block_size, pass.queries(layer),
                   pass.attended(layer), lse);
    // 3. Output projection, MLP, residuals.
    pass.finish_layer(layer);
  }
  return pass.logits();
}

}  // namespace kvrt::model
