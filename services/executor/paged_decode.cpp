#include "services/executor/paged_decode.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "services/common/units.hpp"
#include "services/executor/attention_workers.hpp"

namespace kvrt::executor {

Status check_head_mapping(const HeadMapping& heads, uint32_t pool_kv_heads, const std::string& field) {
  if (heads.q_heads == 0 || heads.kv_heads == 0 || heads.q_heads % heads.kv_heads != 0)
    return make_error(ErrorCode::executor_head_mapping,
                      "H_q = " + std::to_string(heads.q_heads) +
                          " is not a positive multiple of H_kv = " + std::to_string(heads.kv_heads),
                      field);
  if (heads.kv_heads != pool_kv_heads)
    return make_error(ErrorCode::executor_head_mapping,
                      "the mapping reads H_kv = " + std::to_string(heads.kv_heads) + " K/V heads but the pool holds " +
                          std::to_string(pool_kv_heads),
                      field + ".kv_heads");
  return Status::success();
}

Status check_span_size(std::size_t actual, uint64_t expected, const std::string& field, bool optional) {
  if (optional && actual == 0) return Status::success();
  if (actual != expected)
    return make_error(ErrorCode::executor_shape_mismatch,
                      std::to_string(actual) + " elements, expected " + std::to_string(expected), field);
  return Status::success();
}

namespace {

// One (request, partition) work item: every query head of the request over
// the partition's rows (RowsWorker walks the K/V heads inside each window).
struct DecodeItem {
  uint32_t request = 0;
  uint32_t partition = 0;
};

template <class T>
Result<DecodeReceipt> decode_impl(const PagedKvView& view, const DecodeArgsT<T>& a, ThreadPool* pool,
                                  Workspace* workspace) {
  KVRT_TRY(check_head_mapping(a.heads, view.kv_heads, "heads"));
  const uint64_t batch = a.requests.size();
  const uint32_t hq = a.heads.q_heads;
  const uint32_t dk = view.k.head_dim, dv = view.v.head_dim;
  KVRT_TRY(check_span_size(a.queries.size(), batch * hq * dk, "queries"));
  KVRT_TRY(check_span_size(a.outputs.size(), batch * hq * dv, "outputs"));
  KVRT_TRY(check_span_size(a.lse.size(), batch * hq, "lse", /*optional=*/true));
  uint32_t p_k = 0;
  KVRT_TRY_ASSIGN(p_k, kernel_block_tokens_for(view, a.options.kernel_block_tokens));
  for (uint64_t r = 0; r < batch; ++r)
    KVRT_TRY(check_block_table(a.requests[r].table, view, p_k, "requests[" + std::to_string(r) + "].table"));
  if (a.options.partition_tokens % p_k != 0)
    return make_error(ErrorCode::kernel_block_not_divisor,
                      "partition of " + std::to_string(a.options.partition_tokens) +
                          " tokens is not a multiple of the kernel block P_k = " + std::to_string(p_k),
                      "options.partition_tokens");

  ThreadPool inline_pool(1);
  ThreadPool& threads = pool != nullptr ? *pool : inline_pool;
  // Split-K plan. An explicit P_part applies to every request. Otherwise,
  // with several workers, P_part is a quarter of a worker's fair share of all
  // rows (at least 512, a multiple of P_k): a request longer than that splits,
  // so one long context never leaves the other workers idle, while a batch of
  // equal requests with enough of them to go round does not split at all.
  uint64_t total_rows = 0;
  for (uint64_t r = 0; r < batch; ++r) total_rows += a.requests[r].table.context_tokens;
  const uint64_t auto_part =
      threads.workers() == 1
          ? UINT64_MAX
          : std::max<uint64_t>(512, ceil_div(ceil_div(total_rows, 4ull * threads.workers()), p_k) * p_k);
  std::vector<uint64_t> part_tokens(batch), parts(batch), part_base(batch);
  std::vector<DecodeItem> items;
  uint64_t split_rows = 0;  // partial-state rows of split requests
  DecodeReceipt receipt;
  receipt.kernel_block_tokens = p_k;
  for (uint64_t r = 0; r < batch; ++r) {
    const uint64_t ctx = a.requests[r].table.context_tokens;
    const uint64_t pt = a.options.partition_tokens != 0 ? a.options.partition_tokens : std::min(auto_part, ctx);
    part_tokens[r] = pt;
    parts[r] = ceil_div(ctx, pt);
    part_base[r] = split_rows;
    if (parts[r] > 1) split_rows += parts[r] * hq;
    for (uint64_t p = 0; p < parts[r]; ++p) items.push_back({uint32_t(r), uint32_t(p)});
    receipt.kernel_blocks += ceil_div(ctx, p_k) * view.kv_heads;
    receipt.partitions += parts[r];
    receipt.kv_rows += ctx * view.kv_heads;
  }
  receipt.kv_bytes = receipt.kv_rows * (uint64_t{dk} * view.k.scalar_bytes() + uint64_t{dv} * view.v.scalar_bytes());

  const T scale = T(1) / std::sqrt(T(dk));
  Workspace local;
  PartialBuffer<T> split = PartialBuffer<T>::take(workspace != nullptr ? *workspace : local, split_rows, dv);
  std::vector<std::unique_ptr<RowsWorker<T>>> workers(threads.workers());
  for (auto& w : workers) w = std::make_unique<RowsWorker<T>>();

  threads.parallel_for(items.size(), [&](std::size_t i, unsigned wi) {
    const DecodeItem it = items[i];
    const KvBlockTable& table = a.requests[it.request].table;
    const uint64_t begin = uint64_t{it.partition} * part_tokens[it.request];
    const uint64_t end = std::min(table.context_tokens, begin + part_tokens[it.request]);
    const uint64_t first_q = uint64_t{it.request} * hq;  // query row index of head 0
    RowsWorker<T>& w = *workers[wi];
    w.start(view, a.queries.data() + first_q * dk, hq, scale, begin);
    for (uint64_t j = begin / p_k; j * p_k < end; ++j) {
      const KernelBlock b = kernel_block(table, view.block_tokens, p_k, j);
      w.feed(b.slot, b.first_row, b.rows);
    }
    PartialStates<T>& st = w.finish();
    if (parts[it.request] == 1) {
      for (uint32_t h = 0; h < hq; ++h)
        finalize_state(st.valid[h], st.m[h], st.l[h], &st.u[uint64_t{h} * dv], dv,
                       a.outputs.data() + (first_q + h) * dv, a.lse.empty() ? nullptr : a.lse.data() + first_q + h);
      return;
    }
    // Split request: state row (query head, partition) of the request's block.
    for (uint32_t h = 0; h < hq; ++h) {
      split.store(part_base[it.request] + uint64_t{h} * parts[it.request] + it.partition, st, h);
    }
  });
  if (split_rows == 0) return receipt;

  // Reduction: merge each split row's partitions in order (exact, 0x0BA).
  std::vector<std::pair<uint32_t, uint32_t>> reduce;  // (request, query head)
  for (uint64_t r = 0; r < batch; ++r)
    if (parts[r] > 1)
      for (uint32_t h = 0; h < hq; ++h) reduce.push_back({uint32_t(r), h});
  threads.parallel_for(reduce.size(), [&](std::size_t i, unsigned) {
    const auto [r, h] = reduce[i];
    std::vector<T> u(dv, T(0));
    uint64_t valid = 0;
    T m = 0, l = 0;
    for (uint64_t p = 0; p < parts[r]; ++p) {
      StateRef<T> src = split.row(part_base[r] + uint64_t{h} * parts[r] + p);
      merge_state(StateRef<T>{&valid, &m, &l, u.data()}, *src.valid, *src.m, *src.l, src.u, dv);
    }
    const uint64_t q = uint64_t{r} * hq + h;
    finalize_state(valid, m, l, u.data(), dv, a.outputs.data() + q * dv, a.lse.empty() ? nullptr : a.lse.data() + q);
  });
  return receipt;
}

}  // namespace

Result<DecodeReceipt> paged_decode(const PagedKvView& view, const DecodeArgs& args, ThreadPool* pool,
                                   Workspace* workspace) {
  return decode_impl(view, args, pool, workspace);
}
Result<DecodeReceipt> paged_decode(const PagedKvView& view, const DecodeArgs64& args, ThreadPool* pool,
                                   Workspace* workspace) {
  return decode_impl(view, args, pool, workspace);
}

}  // namespace kvrt::executor
