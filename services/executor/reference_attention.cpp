#include "services/executor/reference_attention.hpp"

#include <cmath>
#include <limits>

namespace kvrt::executor {

void reference_row(const PagedKvView& view, uint32_t kv_head, const double* q, std::span<const KeyLocation> keys,
                   double* out, double* lse) {
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  const double inv_sqrt_d = 1.0 / std::sqrt(double(dk));
  std::vector<double> scores(keys.size());
  double best = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < keys.size(); ++i) {
    double dot = 0;
    for (uint32_t x = 0; x < dk; ++x) dot += q[x] * load_element(view.k, keys[i].slot, keys[i].row, kv_head, x);
    scores[i] = dot * inv_sqrt_d;
    best = std::max(best, scores[i]);
  }
  double z = 0;
  for (uint32_t x = 0; x < dv; ++x) out[x] = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const double w = std::exp(scores[i] - best);
    z += w;
    for (uint32_t x = 0; x < dv; ++x) out[x] += w * load_element(view.v, keys[i].slot, keys[i].row, kv_head, x);
  }
  for (uint32_t x = 0; x < dv; ++x) out[x] /= z;
  if (lse != nullptr) *lse = best + std::log(z);
}

std::vector<KeyLocation> table_keys(const KvBlockTable& table, uint32_t block_tokens) {
  std::vector<KeyLocation> keys(table.context_tokens);
  for (uint64_t t = 0; t < table.context_tokens; ++t)
    keys[t] = KeyLocation{table.slots[t / block_tokens], static_cast<uint32_t>(t % block_tokens)};
  return keys;
}

std::vector<KeyLocation> path_keys(const ExecutionSnapshot& s, uint32_t sequence) {
  std::vector<KeyLocation> keys;
  for (uint32_t c : s.sequences[sequence].path)
    for (const KvRowRun& r : s.chunks[c].runs)
      for (uint32_t i = 0; i < r.rows; ++i) keys.push_back(KeyLocation{r.slot, r.first_row + i});
  return keys;
}

void reference_decode(const PagedKvView& view, const HeadMapping& heads, std::span<const DecodeRequest> requests,
                      std::span<const double> queries, std::span<double> outputs, std::span<double> lse) {
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  for (uint64_t r = 0; r < requests.size(); ++r) {
    const std::vector<KeyLocation> keys = table_keys(requests[r].table, view.block_tokens);
    for (uint32_t h = 0; h < heads.q_heads; ++h) {
      const uint64_t row = r * heads.q_heads + h;
      reference_row(view, heads.kv_head_of(h), queries.data() + row * dk, keys, outputs.data() + row * dv,
                    lse.empty() ? nullptr : lse.data() + row);
    }
  }
}

void reference_prefill(const PagedKvView& view, const HeadMapping& heads, std::span<const PrefillRequest> requests,
                       std::span<const double> queries, std::span<double> outputs, std::span<double> lse) {
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  uint64_t token_row = 0;
  for (const PrefillRequest& req : requests) {
    const std::vector<KeyLocation> all = table_keys(req.table, view.block_tokens);
    const uint64_t first = req.table.context_tokens - req.suffix_tokens;
    for (uint32_t i = 0; i < req.suffix_tokens; ++i, ++token_row) {
      const std::span<const KeyLocation> visible(all.data(), first + i + 1);
      for (uint32_t h = 0; h < heads.q_heads; ++h) {
        const uint64_t row = token_row * heads.q_heads + h;
        reference_row(view, heads.kv_head_of(h), queries.data() + row * dk, visible, outputs.data() + row * dv,
                      lse.empty() ? nullptr : lse.data() + row);
      }
    }
  }
}

void reference_snapshot(const PagedKvView& view, const ExecutionSnapshot& s, std::span<const double> queries,
                        std::span<double> outputs, std::span<double> lse) {
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  const HeadMapping& heads = s.contract.heads;
  for (uint32_t q = 0; q < s.sequences.size(); ++q) {
    const std::vector<KeyLocation> keys = path_keys(s, q);
    for (uint32_t h = 0; h < heads.q_heads; ++h) {
      const uint64_t row = uint64_t{q} * heads.q_heads + h;
      reference_row(view, heads.kv_head_of(h), queries.data() + row * dk, keys, outputs.data() + row * dv,
                    lse.empty() ? nullptr : lse.data() + row);
    }
  }
}

}  // namespace kvrt::executor
