#include "engine/model/model_weights.hpp"

#include <cmath>
#include <string>

#include "services/common/splitmix64.hpp"

namespace kvrt::model {
namespace {

// Maxima of the config fields (documented in config/model.toml): they keep
// every product below in 64 bits and a mistyped size from allocating the
// machine away. vocab stays far below 2^31 because token ids are int32.
constexpr uint32_t kMaxVocab = 1u << 20;
constexpr uint32_t kMaxDModel = 8192;
constexpr uint32_t kMaxQHeadsPerKv = 64;
constexpr uint32_t kMaxMlpDim = 65536;
constexpr uint32_t kMaxThreads = 256;
constexpr uint64_t kMaxKvWidth = 1u << 16;  // H_kv * d_h of one layer [scalars]

Status check_size(uint64_t value, uint64_t max, const char* field) {
  if (value == 0 || value > max)
    return make_error(
        ErrorCode::config_field,
        std::string(field) + " = " + std::to_string(value) + " is outside [1, " + std::to_string(max) + "]", field);
  return Status::success();
}

// Uniform in [-1, 1) on the grid 2^-23: the top 24 bits k of the next
// splitmix64 output give (k - 2^23) * 2^-23, exact in binary32.
float symmetric(SplitMix64& s) { return float(int32_t(s.next() >> 40) - (1 << 23)) * 0x1p-23f; }

std::vector<float> draw_matrix(SplitMix64& rng, uint64_t in, uint64_t out) {
  const float scale = float(1.0 / std::sqrt(double(in)));
  std::vector<float> w(in * out);
  for (float& x : w) x = symmetric(rng) * scale;
  return w;
}

std::vector<float> draw_gain(SplitMix64& rng, uint32_t n) {
  std::vector<float> g(n);
  for (float& x : g) x = 1.0f + symmetric(rng) * 0.25f;
  return g;
}

}  // namespace

Status check_model_config(const ModelConfig& c) {
  KVRT_TRY(check_size(c.vocab, kMaxVocab, "vocab"));
  KVRT_TRY(check_size(c.d_model, kMaxDModel, "d_model"));
  KVRT_TRY(check_size(c.q_heads_per_kv, kMaxQHeadsPerKv, "q_heads_per_kv"));
  KVRT_TRY(check_size(c.mlp_dim, kMaxMlpDim, "mlp_dim"));
  // theta <= 1 makes every RoPE frequency >= 1 rad per token: positions
  // alias within a few tokens, which no real position contract does.
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 1.0)
    return make_error(ErrorCode::config_field,
                      "rope_theta = " + std::to_string(c.rope_theta) + " must be finite and above 1", "rope_theta");
  KVRT_TRY(check_size(c.threads, kMaxThreads, "threads"));
  return Status::success();
}

Result<ModelShape> model_shape(const ModelConfig& config, const CacheLayoutManifest& layout) {
  KVRT_TRY(check_model_config(config));
  KVRT_TRY(layout.validate());
  // One rank's K/V is only part of each layer's heads; a model computing
  // all heads would write rows no pool of this rank holds.
  if (layout.tp_world_size != 1)
    return make_error(
        ErrorCode::incompatible,
        "the reference model runs unsharded; the layout has tp_world_size " + std::to_string(layout.tp_world_size),
        "layout.tp_world_size");
  ModelShape shape;
  shape.vocab = config.vocab;
  shape.d_model = config.d_model;
  shape.mlp_dim = config.mlp_dim;
  for (uint32_t layer = 0; layer < layout.layer_count(); ++layer) {
    const CacheGroupLayout* group = layout.group_for_layer(layer);
    const uint32_t g = static_cast<uint32_t>(group - layout.cache_groups.data());
    const std::string field = "layout.cache_groups[" + std::to_string(g) + "]";
    // H_kv * d_h is the K (and V) width of one row; bounding it keeps H_q * d_h
    // (G <= 64 times more) and every product with d_model far inside 64 bits.
    if (uint64_t{group->kv_heads_local} * group->head_dim > kMaxKvWidth)
      return make_error(ErrorCode::incompatible,
                        "H_kv * d_h = " + std::to_string(uint64_t{group->kv_heads_local} * group->head_dim) +
                            " scalars per row exceeds the model's " + std::to_string(kMaxKvWidth),
                        field + ".kv_heads_local");
    if (group->head_dim % 2 != 0)
      return make_error(ErrorCode::incompatible,
                        "RoPE rotate-half needs an even head_dim; the group has " + std::to_string(group->head_dim),
                        field + ".head_dim");
    shape.layers.push_back(LayerShape{g, layer - group->layer_start, group->kv_heads_local,
                                      group->kv_heads_local * config.q_heads_per_kv, group->head_dim});
  }
  if (shape.weight_count() > kMaxWeightCount)
    return make_error(ErrorCode::config_field,
                      "the weights would take " + std::to_string(shape.weight_count()) + " floats (limit " +
                          std::to_string(kMaxWeightCount) + ")",
                      "d_model");
  return shape;
}

uint64_t ModelShape::weight_macs() const {
  const uint64_t d = d_model;
  uint64_t macs = d * vocab;  // unembedding
  for (const LayerShape& l : layers) macs += d * l.qkv_dim() + uint64_t{l.q_dim()} * d + 2 * d * mlp_dim;
  return macs;
}

uint64_t ModelShape::weight_count() const {
  // Products of values below 2^32 summed a few hundred times: no overflow
  // for validated configs (d_model <= 2^13, vocab <= 2^20, kv_dim < 2^32).
  const uint64_t d = d_model;
  uint64_t n = 2 * d * vocab + d;  // embedding, unembedding, final norm
  for (const LayerShape& l : layers) n += 2 * d + d * l.qkv_dim() + uint64_t{l.q_dim()} * d + 2 * d * mlp_dim;
  return n;
}

ModelWeights draw_model_weights(const ModelShape& shape, uint64_t seed) {
  SplitMix64 rng{seed};
  ModelWeights w;
  const uint32_t d = shape.d_model;
  w.embedding = draw_matrix(rng, 1, uint64_t{shape.vocab} * d);  // fan-in 1: uniform [-1, 1)
  for (const LayerShape& l : shape.layers) {
    LayerWeights& lw = w.layers.emplace_back();
    lw.attn_norm = draw_gain(rng, d);
    lw.w_qkv = draw_matrix(rng, d, l.qkv_dim());
    lw.w_o = draw_matrix(rng, l.q_dim(), d);
    lw.mlp_norm = draw_gain(rng, d);
    lw.w_up = draw_matrix(rng, d, shape.mlp_dim);
    lw.w_down = draw_matrix(rng, shape.mlp_dim, d);
  }
  w.final_norm = draw_gain(rng, d);
  w.unembed = draw_matrix(rng, d, shape.vocab);
  return w;
}

std::vector<double> rope_inverse_frequencies(double theta, uint32_t head_dim) {
  std::vector<double> f(head_dim / 2);
  for (uint32_t i = 0; i < f.size(); ++i) f[i] = std::pow(theta, -2.0 * i / head_dim);
  return f;
}

}  // namespace kvrt::model
