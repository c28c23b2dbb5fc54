#pragma once
// Decode over the mapper's contiguous virtual tensors (vAttention path, spec
// 0x06C, 0x0BJ). A request's K/V rows are one virtually contiguous run
// [token][head][lane] inside its request slot, so the kernel follows plain
// strides: token t of slot b is at base + b*R + t*B_row. There is no
// user-space block table to consult (0x0BJ: the oracle assigns the path zero
// block-table lookups; hardware translation and mapping work are not zero,
// they are the mapper's business).
//
// Map before use (0x06D): rows are readable only inside the slot's mapped and
// written frontier. check_contiguous_readable() asks the mapper for each
// request before the first read; contiguous_decode() itself checks only that
// the context fits the reservation (T <= T_max).
#include <cstdint>
#include <span>

#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/mapper/vmm_mapper.hpp"

namespace kvrt::executor {

struct ContiguousRequest {
  uint32_t slot = 0;            // request slot b of the reservation
  uint64_t context_tokens = 0;  // T [tokens]
};

template <class T>
struct ContiguousDecodeArgsT {
  HeadMapping heads;
  std::span<const ContiguousRequest> requests;
  std::span<const T> queries;     // [B][H_q][d]
  std::span<T> outputs;           // [B][H_q][d]
  std::span<T> lse;               // [B][H_q] or empty
  uint32_t partition_tokens = 0;  // P_part as in AttentionOptions (0: automatic)
};
using ContiguousDecodeArgs = ContiguousDecodeArgsT<float>;
using ContiguousDecodeArgs64 = ContiguousDecodeArgsT<double>;

// The view must come from contiguous_kv_view(). Errors: those of paged_decode
// (coordinate_out_of_range for a slot outside the reservation,
// executor_frontier_mismatch for T = 0), and row_not_valid naming the request
// when T exceeds T_max.
Result<DecodeReceipt> contiguous_decode(const PagedKvView& view, const ContiguousDecodeArgs& args,
                                        ThreadPool* pool = nullptr, Workspace* workspace = nullptr);
Result<DecodeReceipt> contiguous_decode(const PagedKvView& view, const ContiguousDecodeArgs64& args,
                                        ThreadPool* pool = nullptr, Workspace* workspace = nullptr);

// One mapper query per request: its slot generation is current and rows
// [0, T) are mapped and written (VmmMapper::check_readable).
struct MappedRead {
  RequestId request;
  SlotGeneration generation;
  uint64_t context_tokens = 0;
};
Status check_contiguous_readable(const VmmMapper& mapper, std::span<const MappedRead> reads);

}  // namespace kvrt::executor
