#pragma once
// Arguments shared by the executor's attention entry points.
//
// Precision: K/V are stored as fp32, fp16 or bf16 (per the layout
// manifest) and always widened exactly. The element type T of the query and
// output spans selects the accumulation: T = float accumulates scores, the
// online-softmax state and outputs in binary32 (the serving mode); T = double
// runs the same schedule in binary64, the reference mode the FP64 checks and
// the later CUDA kernels compare against.
//
// Documented accuracy (checked by tests/executor_decode_test.cpp and the
// other [executor] suites), row-relative error max|O - O_ref| / max|O_ref|
// against the FP64 monolithic reference:
//   - FP32 accumulation over the same stored rows, any storage dtype: <= 1e-5
//     (widening is exact, so only accumulation rounds);
//   - FP64 accumulation over the same stored rows: <= 1e-12;
//   - fp16 / bf16 storage against the unrounded fp32 rows: <= 2u, i.e.
//     9.8e-4 (fp16, u = 2^-11) and 7.8e-3 (bf16, u = 2^-8); about u/2 is
//     typical. This is the storage format's error, not the kernel's.
//
// Conventions (0x0BA): score s = (q . k) / sqrt(d_qk); LSE is the natural
// logarithm of the softmax denominator including the running maximum,
// LSE = m + log(l); outputs are normalised (O = u / l).
//
// Layouts (row-major, innermost last):
//   queries  [rows][H_q][d_qk]   rows = one per request (decode), or the
//                                 suffix tokens of every request in order (prefill)
//   outputs  [rows][H_q][d_v]
//   lse      [rows][H_q]          optional
#include <cstdint>
#include <span>
#include <string>

#include "services/common/result.hpp"
#include "services/executor/block_table.hpp"

namespace kvrt::executor {

// Grouped-query attention: query head j reads K/V head j / G with
// G = H_q / H_kv (the contiguous grouping of GQA; MHA is G = 1, MQA H_kv = 1).
struct HeadMapping {
  uint32_t q_heads = 0;   // H_q [heads]
  uint32_t kv_heads = 0;  // H_kv [heads]

  uint32_t group_size() const { return q_heads / kv_heads; }  // G
  uint32_t kv_head_of(uint32_t q_head) const { return q_head / group_size(); }
  friend bool operator==(const HeadMapping&, const HeadMapping&) = default;
};
// executor_head_mapping when a count is zero or H_kv does not divide H_q, or
// when the pool holds another number of K/V heads than the mapping reads.
Status check_head_mapping(const HeadMapping& heads, uint32_t pool_kv_heads, const std::string& field);

struct AttentionOptions {
  // P_k: rows per kernel block; 0 reads each allocator block as one kernel
  // block (P_k = P_a). Must divide P_a (0x0AC).
  uint32_t kernel_block_tokens = 0;
  // P_part: rows per split-K partition of a long context. 0 lets the kernel
  // choose: with several workers, a quarter of a worker's fair share of the
  // batch's rows (at least 512), so a long request splits and a batch of
  // many short ones does not. A positive value must be a multiple of P_k
  // (0x0A: N_blocks/part = P_part / P_k).
  uint32_t partition_tokens = 0;
};

struct DecodeRequest {
  KvBlockTable table;  // the request's table of this layer's cache group
};

// One decode query per request against its paged history.
template <class T>
struct DecodeArgsT {
  HeadMapping heads;
  std::span<const DecodeRequest> requests;
  std::span<const T> queries;  // [B][H_q][d_qk]
  std::span<T> outputs;        // [B][H_q][d_v]
  std::span<T> lse;            // [B][H_q] or empty
  AttentionOptions options;
};
using DecodeArgs = DecodeArgsT<float>;
using DecodeArgs64 = DecodeArgsT<double>;

// Prefill of a suffix over a cached prefix: the request's table already holds
// its prefix and its suffix rows (the model wrote the suffix K/V before
// attending), context_tokens = prefix + suffix. Suffix row i sits at position
// T - suffix_tokens + i and attends causally to positions [0, that position].
struct PrefillRequest {
  KvBlockTable table;
  uint32_t suffix_tokens = 0;  // query rows of this request [tokens], <= T
};
template <class T>
struct PrefillArgsT {
  HeadMapping heads;
  std::span<const PrefillRequest> requests;
  std::span<const T> queries;  // [sum suffix_tokens][H_q][d_qk], requests in order
  std::span<T> outputs;        // [sum suffix_tokens][H_q][d_v]
  std::span<T> lse;            // [sum suffix_tokens][H_q] or empty
  // Query rows per chunk (chunked prefill): each chunk of a request's suffix
  // is one unit of work against keys [0, its last position]. 0 = 64.
  uint32_t chunk_tokens = 0;
  uint32_t kernel_block_tokens = 0;  // P_k as in AttentionOptions
};
using PrefillArgs = PrefillArgsT<float>;
using PrefillArgs64 = PrefillArgsT<double>;

// Checks a span's length against rows x heads x width; executor_shape_mismatch
// names `field` otherwise. An optional span may be empty.
Status check_span_size(std::size_t actual, uint64_t expected, const std::string& field, bool optional = false);

}  // namespace kvrt::executor
