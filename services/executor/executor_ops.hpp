#pragma once
// The kernel executor owner's wire operations (issue 5 "the kernel executor"
// owner; DESIGN.md "execute(snapshot) -> executor"): decode attention of one
// query row per query head of a request the session holds, computed by the
// node over its own pools. The node resolves the request's block table from
// the allocator owner itself, under the session's ownership and at the table
// version the worker names, so a worker can never point the kernels at rows
// it does not own (0x0BH: the executor reads only what a current receipt
// names). One outcome per op, in order; a failing op answers a typed Error
// and the batch goes on.
#include <cstdint>
#include <cstring>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/ids.hpp"
#include "services/common/trace_context.hpp"

namespace kvrt {

// Float payloads compare bit for bit: a receipt that carries a NaN equals
// itself, and +0 and -0 differ (exactness is about bits, 0x0BA).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct DecodeAttentionOp {
  RequestId request;
  TableVersion table_version;  // the version the queries were computed against; 0 = current
  uint32_t layer = 0;          // model layer
  uint32_t q_heads = 0;        // H_q; H_kv comes from the layout
  std::vector<float> queries;  // [H_q][d_qk]
  friend bool operator==(const DecodeAttentionOp& a, const DecodeAttentionOp& b) {
    return a.request == b.request && a.table_version == b.table_version && a.layer == b.layer &&
           a.q_heads == b.q_heads && same_bits(a.queries, b.queries);
  }
};

struct AttentionOutput {
  RequestId request;
  TableVersion table_version;  // the table version executed
  uint32_t layer = 0;
  uint32_t context_tokens = 0;  // keys attended [tokens]
  std::vector<float> outputs;   // [H_q][d_v]
  std::vector<float> lse;       // [H_q]
  uint64_t kv_rows = 0;         // K/V rows read, per K/V head once [rows]
  friend bool operator==(const AttentionOutput& a, const AttentionOutput& b) {
    return a.request == b.request && a.table_version == b.table_version && a.layer == b.layer &&
           a.context_tokens == b.context_tokens && same_bits(a.outputs, b.outputs) && same_bits(a.lse, b.lse) &&
           a.kv_rows == b.kv_rows;
  }
};

using ExecuteOutcome = std::variant<AttentionOutput, Error>;

struct ExecuteBatch {
  TraceContext trace;
  std::vector<DecodeAttentionOp> ops;
  friend bool operator==(const ExecuteBatch&, const ExecuteBatch&) = default;
};

struct ExecuteBatchReceipt {
  TraceContext trace;
  std::vector<ExecuteOutcome> outcomes;
  friend bool operator==(const ExecuteBatchReceipt&, const ExecuteBatchReceipt&) = default;
};

}  // namespace kvrt
