// ReferenceModel::forward(): the deterministic reference transformer of
// `kvrt run` (shape and weights: model_weights.hpp; per-row arithmetic:
// model_kernels.hpp; the row stages around attention: forward_rows.hpp;
// argument checks: forward_plan.hpp; shared-prefix decode:
// shared_prefix_decode.cpp).
//
// One layer, for every computed row r at position p (pre-norm residual):
//   h = RMSNorm(x_r);  [q | k | v] = h W_qkv;  RoPE(q, p), RoPE(k, p)
//   store k, v in the cache at the row's (slot, row) in the group's dtypes
//   o = attention(q over the cached rows [0, p])       (executor::paged_prefill)
//   x_r += o W_o;  x_r += ReLU(RMSNorm(x_r) W_up) W_down
// and, for each chunk's last row, logits = RMSNorm(x_r) W_unembed.
//
// Batch invariance (reference_model.hpp). Projections, norms and RoPE are
// per-row functions with one fixed operation order (model_kernels.hpp), so
// they cannot see the batch. Attention is the executor's tile kernel
// (attention_tile.cpp) driven by paged_prefill, and we checked that each
// query row's result is independent of the rows that share its chunk:
//   - a work item is (request, chunk, K/V head); the tile kernel treats each
//     query row as its own column: scores, the column maximum, exp, the
//     column sum and the P V product are per column, with the same operation
//     sequence for every column and every tile position;
//   - key windows always start at position 0 and cut every kTileWindow = 64
//     keys (KvWindow::feed), so every row sees the same windows at the same
//     absolute positions whatever chunk it is in; only the last window is
//     shortened to the chunk's end;
//   - keys past a row's own position are masked to -inf: they leave the
//     maximum alone, exp_nonpositive(-inf) is exactly 0 (simd.hpp), and
//     adding 0 (or 0 * v) changes no sum; a window that is all masked for a
//     row changes nothing either (no rescale, all-zero probabilities).
// So a row computed alone (decode: a suffix of 1), inside a chunk of a long
// suffix, or next to other sequences gets the same bits. chunk_tokens is
// still fixed (kAttentionChunkTokens) so that the schedule, and the
// statement above, never depend on an executor default; 64 rows x G query
// heads fill the tile kernel's columns while wasting at most one chunk's
// causal half. Worker threads take whole items, never parts of a row, so the
// thread count cannot change a bit. tests/model_test.cpp checks all of this
// bitwise.
#include "engine/model/reference_model.hpp"

#include <utility>

#include "engine/model/forward_plan.hpp"
#include "engine/model/forward_rows.hpp"
#include "engine/model/model_weights.hpp"
#include "services/common/assert.hpp"
#include "services/executor/paged_prefill.hpp"
#include "services/executor/thread_pool.hpp"

namespace kvrt::model {
namespace {

constexpr uint32_t kAttentionChunkTokens = 64;  // query rows per prefill work item [tokens]

}  // namespace

ReferenceModel::ReferenceModel(ModelConfig config, CacheLayoutManifest layout, std::unique_ptr<Weights> weights)
    : config_(std::move(config)),
      layout_(std::move(layout)),
      weights_(std::move(weights)),
      threads_(std::make_unique<executor::ThreadPool>(config_.threads)) {}
ReferenceModel::ReferenceModel(ReferenceModel&&) noexcept = default;
ReferenceModel& ReferenceModel::operator=(ReferenceModel&&) noexcept = default;
ReferenceModel::~ReferenceModel() = default;

Result<ReferenceModel> ReferenceModel::create(const ModelConfig& config, const CacheLayoutManifest& layout) {
  auto weights = std::make_unique<Weights>();
  KVRT_TRY_ASSIGN(weights->shape, model_shape(config, layout));
  weights->w = draw_model_weights(weights->shape, config.seed);
  for (const LayerShape& l : weights->shape.layers)
    weights->inv_freq.push_back(rope_inverse_frequencies(config.rope_theta, l.head_dim));
  return ReferenceModel(config, layout, std::move(weights));
}

const ModelConfig& ReferenceModel::config() const { return config_; }
uint32_t ReferenceModel::layer_count() const { return static_cast<uint32_t>(weights_->shape.layers.size()); }
// Every weight multiply-add of a row whose logits are computed (the
// embedding is a lookup); attention's 2 * H_q * d_h * (p + 1) per layer at
// position p and the norms are left out, since they depend on the position
// or are not multiply-adds of a matrix.
uint64_t ReferenceModel::macs_per_token() const { return weights_->shape.weight_macs(); }

Result<std::vector<std::vector<float>>> ReferenceModel::forward(ModelKvCache& cache,
                                                                std::span<const ForwardChunk> chunks) const {
  const ModelShape& shape = weights_->shape;
  KVRT_TRY(check_model_cache(shape, layout_, cache));
  ForwardPlan plan;
  KVRT_TRY_ASSIGN(plan, plan_forward(layout_, config_.vocab, cache.slot_count(), chunks));
  if (chunks.empty()) return std::vector<std::vector<float>>{};

  // Nothing is written above this line; below, every argument has been checked.
  RowPass pass(*weights_, layout_, *threads_, chunks, plan);
  pass.embed();
  for (uint32_t layer = 0; layer < shape.layers.size(); ++layer) {
    const LayerShape& ls = shape.layers[layer];
    // 1. Q, K, V; K and V go into the cache before anything attends.
    pass.project_and_store(layer, cache);
    // 2. Causal attention of every chunk's suffix over its cached rows.
    executor::PrefillArgs args;
    args.heads = executor::HeadMapping{ls.q_heads, ls.kv_heads};
    args.requests = plan.requests[ls.group_index];
    args.queries = pass.queries(layer);
    args.outputs = pass.attended(layer);
    args.chunk_tokens = kAttentionChunkTokens;
    args.kernel_block_tokens = layout_.kernel_block_size;
    auto attention = executor::paged_prefill(cache.layer_view(layer), args, threads_.get());
    KVRT_ASSERT(attention.ok(), "paged_prefill refused checked arguments: " + attention.error().describe());
    // 3. Output projection, MLP, residuals.
    pass.finish_layer(layer);
  }
  return pass.logits();
}

}  // namespace kvrt::model
