#include "engine/model/forward_rows.hpp"

#include <algorithm>
#include <string>

#include "engine/model/model_kernels.hpp"

namespace kvrt::model {
namespace {

constexpr uint64_t kRowsPerItem = 4;  // token rows per thread-pool item of the projections

}  // namespace

Status check_model_cache(const ModelShape& shape, const CacheLayoutManifest& layout, const ModelKvCache& cache) {
  if (!(cache.layout() == layout))
    return make_error(ErrorCode::incompatible,
                      "the cache is laid out by manifest '" + cache.layout().manifest_id + "', the model by '" +
                          layout.manifest_id + "'",
                      "cache.layout");
  // A cache's views must have the shapes the model writes through them.
  for (uint32_t l = 0; l < shape.layers.size(); ++l) {
    const executor::PagedKvView& v = cache.layer_view(l);
    const LayerShape& ls = shape.layers[l];
    if (v.kv_heads != ls.kv_heads || v.k.head_dim != ls.head_dim || v.v.head_dim != ls.head_dim ||
        v.block_tokens != layout.allocator_block_size || v.slot_count < cache.slot_count())
      return make_error(ErrorCode::incompatible,
                        "the cache's view of layer " + std::to_string(l) + " disagrees with the layout's shape",
                        "cache.layer_view(" + std::to_string(l) + ")");
  }
  return Status::success();
}

RowPass::RowPass(const ModelParameters& params, const CacheLayoutManifest& layout, executor::ThreadPool& threads,
                 std::span<const ForwardChunk> chunks, const ForwardPlan& plan)
    : params_(params), layout_(layout), threads_(threads), chunks_(chunks), plan_(plan), rows_(plan.rows.size()) {
  const ModelShape& shape = params.shape;
  uint32_t q_width = 0, qkv_width = 0, half_width = 0;
  for (const LayerShape& l : shape.layers) {
    q_width = std::max(q_width, l.q_dim());
    qkv_width = std::max(qkv_width, l.qkv_dim());
    half_width = std::max(half_width, l.head_dim / 2);
  }
  x_.resize(rows_ * shape.d_model);
  queries_.resize(rows_ * q_width);
  attended_.resize(rows_ * q_width);
  scratch_.resize(threads.workers());
  for (Scratch& s : scratch_) {
    s.h.resize(shape.d_model);
    s.qkv.resize(qkv_width);
    s.tmp.resize(shape.d_model);
    s.up.resize(shape.mlp_dim);
    s.cos.resize(half_width);
    s.sin.resize(half_width);
  }
}

template <class PerRow>
void RowPass::for_rows(PerRow&& per_row) {
  threads_.parallel_for((rows_ + kRowsPerItem - 1) / kRowsPerItem, [&](std::size_t item, unsigned worker) {
    const uint64_t end = std::min(rows_, (item + 1) * kRowsPerItem);
    for (uint64_t r = item * kRowsPerItem; r < end; ++r) per_row(r, scratch_[worker]);
  });
}

void RowPass::embed() {
  const uint32_t d = params_.shape.d_model;
  for_rows([&](uint64_t r, Scratch&) {
    const TokenId token = chunks_[plan_.rows[r].chunk].tokens[plan_.rows[r].position];
    std::copy_n(params_.w.embedding.data() + uint64_t(token) * d, d, x_.data() + r * d);
  });
}

void RowPass::project_and_store(uint32_t layer, ModelKvCache& cache) {
  const uint32_t d = params_.shape.d_model, p_a = layout_.allocator_block_size;
  const LayerShape& ls = params_.shape.layers[layer];
  const LayerWeights& lw = params_.w.layers[layer];
  const executor::PagedKvView& view = cache.layer_view(layer);
  std::byte* k_base = cache.writable_k(layer);
  std::byte* v_base = cache.writable_v(layer);
  for_rows([&](uint64_t r, Scratch& s) {
    const ForwardPlan::Row row = plan_.rows[r];
    kernels::rms_norm(x_.data() + r * d, lw.attn_norm.data(), d, s.h.data());
    kernels::project(s.h.data(), d, lw.w_qkv.data(), ls.qkv_dim(), s.qkv.data());
    // RoPE at the row's position id: its storage row unless declared (0x0CB).
    const std::span<const uint32_t> declared = chunks_[row.chunk].positions;
    const uint32_t position = declared.empty() ? row.position : declared[row.position];
    kernels::rope_table(position, params_.inv_freq[layer], s.cos.data(), s.sin.data());
    kernels::rope_rotate(s.qkv.data(), ls.q_heads + ls.kv_heads, ls.head_dim, s.cos.data(), s.sin.data());
    std::copy_n(s.qkv.data(), ls.q_dim(), queries_.data() + r * ls.q_dim());
    const uint32_t slot = chunks_[row.chunk].blocks->slots[ls.group_index][row.position / p_a];
    const uint32_t offset = row.position % p_a;
    kernels::store_heads(view.k, k_base, slot, offset, ls.kv_heads, s.qkv.data() + ls.q_dim());
    kernels::store_heads(view.v, v_base, slot, offset, ls.kv_heads, s.qkv.data() + ls.q_dim() + ls.kv_dim());
  });
}

std::span<const float> RowPass::queries(uint32_t layer) const {
  return std::span<const float>(queries_.data(), rows_ * params_.shape.layers[layer].q_dim());
}

std::span<float> RowPass::attended(uint32_t layer) {
  return std::span<float>(attended_.data(), rows_ * params_.shape.layers[layer].q_dim());
}

void RowPass::finish_layer(uint32_t layer) {
  const ModelShape& shape = params_.shape;
  const uint32_t d = shape.d_model;
  const LayerShape& ls = shape.layers[layer];
  const LayerWeights& lw = params_.w.layers[layer];
  for_rows([&](uint64_t r, Scratch& s) {
    float* xr = x_.data() + r * d;
    kernels::project(attended_.data() + r * ls.q_dim(), ls.q_dim(), lw.w_o.data(), d, s.tmp.data());
    for (uint32_t i = 0; i < d; ++i) xr[i] += s.tmp[i];
    kernels::rms_norm(xr, lw.mlp_norm.data(), d, s.h.data());
    kernels::project(s.h.data(), d, lw.w_up.data(), shape.mlp_dim, s.up.data());
    for (float& u : s.up) u = u > 0.0f ? u : 0.0f;
    kernels::project(s.up.data(), shape.mlp_dim, lw.w_down.data(), d, s.tmp.data());
    for (uint32_t i = 0; i < d; ++i) xr[i] += s.tmp[i];
  });
}

std::vector<std::vector<float>> RowPass::logits() {
  const ModelShape& shape = params_.shape;
  const uint32_t d = shape.d_model;
  std::vector<std::vector<float>> out(chunks_.size(), std::vector<float>(shape.vocab));
  threads_.parallel_for(chunks_.size(), [&](std::size_t c, unsigned worker) {
    Scratch& s = scratch_[worker];
    kernels::rms_norm(x_.data() + plan_.last_row[c] * d, params_.w.final_norm.data(), d, s.h.data());
    kernels::project(s.h.data(), d, params_.w.unembed.data(), shape.vocab, out[c].data());
  });
  return out;
}

}  // namespace kvrt::model
