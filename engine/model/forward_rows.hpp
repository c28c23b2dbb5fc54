#pragma once
// The row stages of one ReferenceModel pass, internal to
// engine/model/: everything of a layer except the attention call, shared by
// forward() (paged_prefill) and forward_shared_prefix() (Hydragen), so both
// compute a row's projections, K/V stores, MLP and logits with the same
// operations in the same order and differ only in how they attend.
//
// One layer over the plan's rows (reference_model.cpp states the model):
//   project_and_store(layer)   h = RMSNorm(x); [q | k | v] = h W_qkv; RoPE;
//                              q -> queries(layer); k, v -> the cache
//   <the caller's attention>   queries(layer) -> attended(layer)
//   finish_layer(layer)        x += attended W_o; x += ReLU(RMSNorm(x) W_up) W_down
// Every stage is a per-row function (model_kernels.hpp) run in items of whole
// rows, so no row's bits depend on the batch or the thread count.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/forward_plan.hpp"
#include "engine/model/model_kv_cache.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/model/reference_model.hpp"
#include "services/common/result.hpp"
#include "services/executor/thread_pool.hpp"

namespace kvrt::model {

// What create() derives from the config and layout once.
struct ModelParameters {
  ModelShape shape;
  ModelWeights w;
  std::vector<std::vector<double>> inv_freq;  // [model layer] RoPE inverse frequencies of its head_dim
};

struct ReferenceModel::Weights : ModelParameters {};

// The cache checks every pass makes first: the cache is laid out by the
// model's manifest (incompatible "cache.layout"), and each layer's view has
// the layer's heads, head width, block size and at least slot_count() slots
// (incompatible "cache.layer_view(l)").
Status check_model_cache(const ModelShape& shape, const CacheLayoutManifest& layout, const ModelKvCache& cache);

// The activations of one checked plan's rows and the stages that advance them.
// Holds references to the parameters, pool, chunks and plan: they must outlive it.
class RowPass {
 public:
  RowPass(const ModelParameters& params, const CacheLayoutManifest& layout, executor::ThreadPool& threads,
          std::span<const ForwardChunk> chunks, const ForwardPlan& plan);

  // x_r = the embedding of row r's token.
  void embed();
  // Stage 1 of `layer`: Q of every row into queries(layer); K and V of every
  // row stored at the row's (slot, offset) in the layer's view of `cache`.
  void project_and_store(uint32_t layer, ModelKvCache& cache);
  // [rows][H_q][d_h] of `layer` (plan row order, one chunk's rows together).
  std::span<const float> queries(uint32_t layer) const;
  // Where the attention call writes: [rows][H_q][d_h] of `layer`.
  std::span<float> attended(uint32_t layer);
  // Stage 3 of `layer`: output projection, MLP and both residuals.
  void finish_layer(uint32_t layer);
  // Logits of every chunk's last row ([chunk][vocab]).
  std::vector<std::vector<float>> logits();

 private:
  struct Scratch {
    std::vector<float> h, qkv, tmp, up, cos, sin;
  };
  template <class PerRow>
  void for_rows(PerRow&& per_row);

  const ModelParameters& params_;
  const CacheLayoutManifest& layout_;
  executor::ThreadPool& threads_;
  std::span<const ForwardChunk> chunks_;
  const ForwardPlan& plan_;
  uint64_t rows_ = 0;
  std::vector<float> x_, queries_, attended_;  // [rows][d_model], [rows][max q_dim] twice
  std::vector<Scratch> scratch_;               // [worker]
};

}  // namespace kvrt::model
