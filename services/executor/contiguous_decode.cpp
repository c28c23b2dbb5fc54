#include "services/executor/contiguous_decode.hpp"

#include <numeric>
#include <string>
#include <vector>

namespace kvrt::executor {
namespace {

// The contiguous path reuses the paged decode schedule with a one-entry
// "table" per request: the request slot itself, whose one "block" is the
// slot's whole range of T_max rows. Every row address is then
// base + slot * R + t * row, i.e. plain strides; the entry is the request's
// identity, not a page lookup, and no per-block translation happens.
template <class T>
Result<DecodeReceipt> contiguous_impl(const PagedKvView& view, const ContiguousDecodeArgsT<T>& a, ThreadPool* pool,
                                      Workspace* workspace) {
  const uint64_t batch = a.requests.size();
  std::vector<uint32_t> slots(batch), valid(batch);
  std::vector<DecodeRequest> requests(batch);
  for (uint64_t r = 0; r < batch; ++r) {
    const ContiguousRequest& req = a.requests[r];
    if (req.context_tokens > view.block_tokens)
      return make_error(ErrorCode::row_not_valid,
                        "context of " + std::to_string(req.context_tokens) +
                            " tokens exceeds the reservation's T_max " + std::to_string(view.block_tokens),
                        "requests[" + std::to_string(r) + "].context_tokens");
    slots[r] = req.slot;
    valid[r] = static_cast<uint32_t>(req.context_tokens);
  }
  for (uint64_t r = 0; r < batch; ++r)
    requests[r].table = KvBlockTable{std::span<const uint32_t>(&slots[r], 1), std::span<const uint32_t>(&valid[r], 1),
                                     a.requests[r].context_tokens};
  DecodeArgsT<T> d;
  d.heads = a.heads;
  d.requests = requests;
  d.queries = a.queries;
  d.outputs = a.outputs;
  d.lse = a.lse;
  // Rows are read in runs of P_k = gcd(T_max, P_part) (512 when P_part is
  // automatic): any divisor of T_max is a legal run, and with plain strides
  // the run length only sets the split-K granularity, not an address step.
  d.options.kernel_block_tokens = std::gcd(view.block_tokens, a.partition_tokens != 0 ? a.partition_tokens : 512u);
  d.options.partition_tokens = a.partition_tokens;
  return paged_decode(view, d, pool, workspace);
}

}  // namespace

Result<DecodeReceipt> contiguous_decode(const PagedKvView& view, const ContiguousDecodeArgs& args, ThreadPool* pool,
                                        Workspace* workspace) {
  return contiguous_impl(view, args, pool, workspace);
}
Result<DecodeReceipt> contiguous_decode(const PagedKvView& view, const ContiguousDecodeArgs64& args, ThreadPool* pool,
                                        Workspace* workspace) {
  return contiguous_impl(view, args, pool, workspace);
}

Status check_contiguous_readable(const VmmMapper& mapper, std::span<const MappedRead> reads) {
  for (const MappedRead& read : reads) {
    if (read.context_tokens > UINT32_MAX)
      return make_error(ErrorCode::coordinate_out_of_range, "context beyond 2^32 tokens", "context_tokens");
    KVRT_TRY(mapper.check_readable(read.request, read.generation, static_cast<uint32_t>(read.context_tokens)));
  }
  return Status::success();
}

}  // namespace kvrt::executor
