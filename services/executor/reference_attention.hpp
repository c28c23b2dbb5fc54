#pragma once
// The FP64 monolithic reference (spec 0x0BE's "reference: concatenate each
// sequence path, evaluate one monolithic attention row"). It shares no code
// with the kernels: it resolves every key position to its (slot, row) on its
// own, widens each element with load_element(), and evaluates
//
//   s_i = (q . k_i) / sqrt(d_qk),   M = max_i s_i,   Z = sum_i e^(s_i - M),
//   O   = sum_i e^(s_i - M) v_i / Z,                  LSE = M + log Z
//
// in binary64 with two passes over the keys (no online rescaling, no
// partitions, no merges). The paged, contiguous and shared-prefix kernels are
// checked against it, and so are the CUDA kernels (tests/gpu_attention_checks.cpp). Slow by design:
// O(rows x keys x d) with per-element address arithmetic.
//
// Arguments are trusted (tests and device checks call it after the kernel
// under test has validated the same arguments).
#include <cstdint>
#include <span>
#include <vector>

#include "services/executor/attention_args.hpp"
#include "services/executor/execution_snapshot.hpp"
#include "services/executor/kv_view.hpp"

namespace kvrt::executor {

struct KeyLocation {
  uint32_t slot = 0;  // [slot index]
  uint32_t row = 0;   // row inside the slot's block [rows]
};

// One attention row of query q ([d_qk]) on K/V head `kv_head` over `keys`, in
// order. Writes out[0, d_v) and *lse (when non-null).
void reference_row(const PagedKvView& view, uint32_t kv_head, const double* q, std::span<const KeyLocation> keys,
                   double* out, double* lse);

// Positions [0, T) of a block table, allocator block by allocator block.
std::vector<KeyLocation> table_keys(const KvBlockTable& table, uint32_t block_tokens);
// The concatenated path of one sequence of a snapshot.
std::vector<KeyLocation> path_keys(const ExecutionSnapshot& snapshot, uint32_t sequence);

// Decode: queries [B][H_q][d_qk] -> outputs [B][H_q][d_v], lse [B][H_q] (or empty).
void reference_decode(const PagedKvView& view, const HeadMapping& heads, std::span<const DecodeRequest> requests,
                      std::span<const double> queries, std::span<double> outputs, std::span<double> lse);
// Prefill: suffix token i of request r attends to positions [0, T - n + i].
void reference_prefill(const PagedKvView& view, const HeadMapping& heads, std::span<const PrefillRequest> requests,
                       std::span<const double> queries, std::span<double> outputs, std::span<double> lse);
// Shared-prefix snapshot: each sequence's monolithic row over its whole path.
void reference_snapshot(const PagedKvView& view, const ExecutionSnapshot& snapshot, std::span<const double> queries,
                        std::span<double> outputs, std::span<double> lse);

}  // namespace kvrt::executor
