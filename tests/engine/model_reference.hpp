#pragma once
// A naive binary64 re-implementation of the reference transformer, for the
// [model] suite: straight loops over a whole sequence, K and V kept
// contiguous and unrounded in double, a textbook two-pass softmax, no
// executor, no pools, no block tables. It shares only the weights with the
// model: they come from draw_model_weights() (the generator itself is
// checked against splitmix64's published first output in model_test.cpp),
// widened exactly to double. Shapes are taken from the layout here, not from
// the model's ModelShape.
#include <cmath>
#include <span>
#include <vector>

#include "engine/model/model_weights.hpp"
#include "engine/model/reference_model.hpp"

namespace kvrt::model::test {

class Fp64Transformer {
 public:
  Fp64Transformer(const ModelConfig& config, const CacheLayoutManifest& layout) : config_(config), layout_(layout) {
    auto shape = model_shape(config, layout);
    REQUIRE(shape.ok());
    weights_ = draw_model_weights(*shape, config.seed);
  }

  // Logits of the last row of `tokens` (the whole sequence is recomputed).
  std::vector<double> logits(std::span<const TokenId> tokens) const {
    const uint32_t d = config_.d_model, n = static_cast<uint32_t>(tokens.size());
    std::vector<std::vector<double>> x(n, std::vector<double>(d));
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t i = 0; i < d; ++i) x[t][i] = weights_.embedding[uint64_t(tokens[t]) * d + i];
    for (uint32_t layer = 0; layer < layout_.layer_count(); ++layer) {
      const CacheGroupLayout& group = *layout_.group_for_layer(layer);
      const LayerWeights& w = weights_.layers[layer];
      const uint32_t hd = group.head_dim, hkv = group.kv_heads_local, hq = hkv * config_.q_heads_per_kv;
      const uint32_t qd = hq * hd, kvd = hkv * hd, width = qd + 2 * kvd;
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (uint32_t t = 0; t < n; ++t) {
        const std::vector<double> qkv = matmul(norm(x[t], w.attn_norm), w.w_qkv, width);
        q[t].assign(qkv.begin(), qkv.begin() + qd);
        k[t].assign(qkv.begin() + qd, qkv.begin() + qd + kvd);
        v[t].assign(qkv.begin() + qd + kvd, qkv.end());
        rope(q[t], hd, t);
        rope(k[t], hd, t);
      }
      for (uint32_t t = 0; t < n; ++t) {
        std::vector<double> o(qd, 0.0);
        for (uint32_t j = 0; j < hq; ++j) {
          const uint32_t kh = j / config_.q_heads_per_kv;  // GQA: contiguous groups
          std::vector<double> s(t + 1);
          double top = -INFINITY;
          for (uint32_t u = 0; u <= t; ++u) {
            double dot = 0;
            for (uint32_t x_ = 0; x_ < hd; ++x_) dot += q[t][j * hd + x_] * k[u][kh * hd + x_];
            s[u] = dot / std::sqrt(double(hd));
            top = std::max(top, s[u]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - top));
          for (uint32_t u = 0; u <= t; ++u)
            for (uint32_t x_ = 0; x_ < hd; ++x_) o[j * hd + x_] += s[u] / sum * v[u][kh * hd + x_];
        }
        add(x[t], matmul(o, w.w_o, d));
        std::vector<double> up = matmul(norm(x[t], w.mlp_norm), w.w_up, config_.mlp_dim);
        for (double& a : up) a = std::max(a, 0.0);
        add(x[t], matmul(up, w.w_down, d));
      }
    }
    return matmul(norm(x[n - 1], weights_.final_norm), weights_.unembed, config_.vocab);
  }

 private:
  static std::vector<double> norm(const std::vector<double>& x, const std::vector<float>& gain) {
    double ms = 0;
    for (double a : x) ms += a * a;
    const double inv = 1.0 / std::sqrt(ms / double(x.size()) + double(kRmsNormEpsilon));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * gain[i];
    return y;
  }
  // y = x W with W stored [in][out].
  static std::vector<double> matmul(const std::vector<double>& x, const std::vector<float>& w, uint32_t out) {
    std::vector<double> y(out, 0.0);
    for (size_t i = 0; i < x.size(); ++i)
      for (uint32_t o = 0; o < out; ++o) y[o] += x[i] * double(w[i * out + o]);
    return y;
  }
  static void add(std::vector<double>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  // Rotate-half RoPE at position p: lanes (i, i + d/2) turn by p * theta^(-2i/d).
  void rope(std::vector<double>& heads, uint32_t hd, uint32_t p) const {
    for (size_t h = 0; h < heads.size() / hd; ++h)
      for (uint32_t i = 0; i < hd / 2; ++i) {
        const double angle = double(p) * std::pow(config_.rope_theta, -2.0 * i / hd);
        double& a = heads[h * hd + i];
        double& b = heads[h * hd + i + hd / 2];
        const double lo = a, hi = b;
        a = lo * std::cos(angle) - hi * std::sin(angle);
        b = hi * std::cos(angle) + lo * std::sin(angle);
      }
  }

  ModelConfig config_;
  CacheLayoutManifest layout_;
  ModelWeights weights_;
};

}  // namespace kvrt::model::test
