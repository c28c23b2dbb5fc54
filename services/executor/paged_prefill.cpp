#include "services/executor/paged_prefill.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "services/common/units.hpp"
#include "services/executor/attention_workers.hpp"

namespace kvrt::executor {
namespace {

constexpr uint32_t kDefaultChunkTokens = 64;
constexpr uint32_t kMaxChunkTokens = 4096;

struct PrefillItem {
  uint32_t request = 0;
  uint32_t chunk = 0;
  uint32_t kv_head = 0;
};

template <class T>
Result<PrefillReceipt> prefill_impl(const PagedKvView& view, const PrefillArgsT<T>& a, ThreadPool* pool) {
  KVRT_TRY(check_head_mapping(a.heads, view.kv_heads, "heads"));
  const uint32_t hq = a.heads.q_heads, group = a.heads.group_size();
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  uint32_t p_k = 0;
  KVRT_TRY_ASSIGN(p_k, kernel_block_tokens_for(view, a.kernel_block_tokens));
  const uint32_t chunk = a.chunk_tokens == 0 ? kDefaultChunkTokens : a.chunk_tokens;
  if (chunk > kMaxChunkTokens)
    return make_error(ErrorCode::invalid_argument,
                      "chunk of " + std::to_string(chunk) + " tokens exceeds " + std::to_string(kMaxChunkTokens),
                      "chunk_tokens");
  std::vector<uint64_t> row_base(a.requests.size());
  std::vector<PrefillItem> items;
  PrefillReceipt receipt;
  receipt.kernel_block_tokens = p_k;
  receipt.chunk_tokens = chunk;
  for (uint64_t r = 0; r < a.requests.size(); ++r) {
    const PrefillRequest& req = a.requests[r];
    const std::string field = "requests[" + std::to_string(r) + "]";
    KVRT_TRY(check_block_table(req.table, view, p_k, field + ".table"));
    if (req.suffix_tokens == 0 || req.suffix_tokens > req.table.context_tokens)
      return make_error(ErrorCode::executor_frontier_mismatch,
                        "suffix of " + std::to_string(req.suffix_tokens) + " tokens over a context of " +
                            std::to_string(req.table.context_tokens),
                        field + ".suffix_tokens");
    row_base[r] = receipt.query_rows;
    receipt.query_rows += req.suffix_tokens;
    const uint64_t chunks = ceil_div(req.suffix_tokens, chunk);
    receipt.chunks += chunks;
    for (uint64_t c = 0; c < chunks; ++c)
      for (uint32_t h = 0; h < view.kv_heads; ++h) items.push_back({uint32_t(r), uint32_t(c), h});
  }
  KVRT_TRY(check_span_size(a.queries.size(), receipt.query_rows * hq * dk, "queries"));
  KVRT_TRY(check_span_size(a.outputs.size(), receipt.query_rows * hq * dv, "outputs"));
  KVRT_TRY(check_span_size(a.lse.size(), receipt.query_rows * hq, "lse", /*optional=*/true));

  ThreadPool inline_pool(1);
  ThreadPool& threads = pool != nullptr ? *pool : inline_pool;
  const T scale = T(1) / std::sqrt(T(dk));
  struct Scratch {
    TileWorker<T> worker;
    std::vector<const T*> q_rows;
    std::vector<uint64_t> limits;
  };
  std::vector<std::unique_ptr<Scratch>> scratch(threads.workers());
  for (auto& s : scratch) s = std::make_unique<Scratch>();

  threads.parallel_for(items.size(), [&](std::size_t i, unsigned wi) {
    const PrefillItem it = items[i];
    const PrefillRequest& req = a.requests[it.request];
    const uint64_t ctx = req.table.context_tokens;
    const uint64_t first_token = uint64_t{it.chunk} * chunk;  // index inside the suffix
    const uint32_t tokens = static_cast<uint32_t>(std::min<uint64_t>(chunk, req.suffix_tokens - first_token));
    const uint64_t first_position = ctx - req.suffix_tokens + first_token;
    Scratch& s = *scratch[wi];
    // Query row m = token i * G + head g of this K/V head's group.
    const uint32_t rows = tokens * group;
    s.q_rows.resize(rows);
    s.limits.resize(rows);
    for (uint32_t t = 0; t < tokens; ++t)
      for (uint32_t g = 0; g < group; ++g) {
        const uint64_t q = (row_base[it.request] + first_token + t) * hq + uint64_t{it.kv_head} * group + g;
        s.q_rows[t * group + g] = a.queries.data() + q * dk;
        s.limits[t * group + g] = first_position + t + 1;  // causal: keys at positions <= its own
      }
    s.worker.start(view, it.kv_head, s.q_rows.data(), rows, scale, s.limits.data(), 0);
    const uint64_t end = first_position + tokens;  // keys [0, end)
    for (uint64_t j = 0; j * p_k < end; ++j) {
      KernelBlock b = kernel_block(req.table, view.block_tokens, p_k, j);
      if (j * p_k + b.rows > end) b.rows = static_cast<uint32_t>(end - j * p_k);
      s.worker.feed(b.slot, b.first_row, b.rows);
    }
    PartialStates<T>& st = s.worker.finish();
    for (uint32_t t = 0; t < tokens; ++t)
      for (uint32_t g = 0; g < group; ++g) {
        const uint32_t m = t * group + g;
        const uint64_t q = (row_base[it.request] + first_token + t) * hq + uint64_t{it.kv_head} * group + g;
        finalize_state(st.valid[m], st.m[m], st.l[m], &st.u[uint64_t{m} * dv], dv, a.outputs.data() + q * dv,
                       a.lse.empty() ? nullptr : a.lse.data() + q);
      }
  });
  return receipt;
}

}  // namespace

Result<PrefillReceipt> paged_prefill(const PagedKvView& view, const PrefillArgs& args, ThreadPool* pool) {
  return prefill_impl(view, args, pool);
}
Result<PrefillReceipt> paged_prefill(const PagedKvView& view, const PrefillArgs64& args, ThreadPool* pool) {
  return prefill_impl(view, args, pool);
}

}  // namespace kvrt::executor
