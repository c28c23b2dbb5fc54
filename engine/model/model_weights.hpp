#pragma once
// The reference model's shape and weights, shared by the model and
// by the FP64 reference of tests/model_test.cpp, which recomputes the same
// transformer from the same weights in straight loops.
//
// Shape. Per model layer, the cache group holding it (0x01A) fixes H_kv and
// d_h; the config fixes G, so H_q = G * H_kv; d_model, mlp_dim and vocab are
// config values.
//
// Weights are drawn from ModelConfig::seed alone by splitmix64, one stream in
// the fixed order of draw_model_weights() below, and mapped to uniform
// floats by integer arithmetic (never std::*_distribution, whose output is
// implementation-defined): the same seed gives the same bits on every
// platform. A matrix of fan-in n is uniform in [-1, 1) * 1/sqrt(n) (the usual
// variance-preserving scale); an RMSNorm gain is 1 + [-1, 1) / 4.
//
// Storage: every matrix is input-major, W[i][o] at w[i * out + o], so that
// y = x W is accumulated for every output o over i = 0, 1, ... in order: the
// loop vectorises across outputs with no reassociation, and each output's
// rounding sequence depends on nothing but the row (batch invariance).
#include <cstdint>
#include <vector>

#include "engine/model/reference_model.hpp"
#include "services/common/result.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::model {

struct LayerShape {
  uint32_t group_index = 0;  // the manifest's cache_groups index holding the layer
  uint32_t layer_local = 0;  // layer - layer_start of that group [layers]
  uint32_t kv_heads = 0;     // H_kv [heads]
  uint32_t q_heads = 0;      // H_q = G * H_kv [heads]
  uint32_t head_dim = 0;     // d_h [lanes], even (RoPE rotate-half pairs lanes x and x + d_h/2)

  uint32_t q_dim() const { return q_heads * head_dim; }    // [scalars]
  uint32_t kv_dim() const { return kv_heads * head_dim; }  // [scalars], of K and of V each
  uint32_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }
};

struct ModelShape {
  uint32_t vocab = 0;
  uint32_t d_model = 0;
  uint32_t mlp_dim = 0;
  std::vector<LayerShape> layers;  // [model layer]

  // Multiply-adds of every weight matrix except the embedding, i.e. of one
  // token row whose logits are computed [MAC / token]; see macs_per_token().
  uint64_t weight_macs() const;
  // Scalars of every weight tensor [floats].
  uint64_t weight_count() const;
};

// Upper bound on ModelShape::weight_count() [floats]: 2^28 floats are 1 GiB.
inline constexpr uint64_t kMaxWeightCount = uint64_t{1} << 28;

// Field checks of a ModelConfig (config_field naming the field: zero sizes,
// sizes above the documented maxima, rope_theta not finite or <= 1, threads
// zero) and of its layout (invalid_manifest from validate(); incompatible
// for tp_world_size != 1 or an odd head_dim; config_field "d_model" when the
// weights would exceed kMaxWeightCount).
Result<ModelShape> model_shape(const ModelConfig& config, const CacheLayoutManifest& layout);
Status check_model_config(const ModelConfig& config);

struct LayerWeights {
  std::vector<float> attn_norm;  // [d_model] RMSNorm gain before attention
  std::vector<float> w_qkv;      // [d_model][q_dim + 2 kv_dim]: columns Q (head-major), then K, then V
  std::vector<float> w_o;        // [q_dim][d_model]
  std::vector<float> mlp_norm;   // [d_model]
  std::vector<float> w_up;       // [d_model][mlp_dim]
  std::vector<float> w_down;     // [mlp_dim][d_model]
};

struct ModelWeights {
  std::vector<float> embedding;  // [vocab][d_model]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [d_model]
  std::vector<float> unembed;     // [d_model][vocab]
};

// Draw order: embedding; per layer attn_norm, w_qkv, w_o, mlp_norm, w_up,
// w_down; final_norm; unembed; each tensor in its storage order.
ModelWeights draw_model_weights(const ModelShape& shape, uint64_t seed);

// RMSNorm epsilon, added to the mean square (both implementations use it).
inline constexpr float kRmsNormEpsilon = 1e-6f;

// RoPE inverse frequencies theta^(-2i/d_h), i in [0, d_h/2), in binary64.
// Position p rotates the lane pair (i, i + d_h/2) by the angle p * inv_freq[i].
std::vector<double> rope_inverse_frequencies(double theta, uint32_t head_dim);

}  // namespace kvrt::model
