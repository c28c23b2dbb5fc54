#pragma once
// Paged decode (spec 0x0A): one query row per request and query head against
// the request's paged K/V history, read through its block table (kernel
// blocks of P_k rows carved from allocator blocks of P_a rows, 0x0AC), with
// the request-visible tail of the last block and nothing past it.
//
// Long contexts split into partitions of P_part rows (split-K). Each
// (request, partition) is an independent work item producing the partition
// states of all H_q query heads: inside it, each window of token rows is read
// K/V head by K/V head, the G query heads of a GQA group together, so every
// K/V byte is read once per request. A second phase merges a request's
// partitions in partition order with the exact merge of online_softmax.hpp. A
// context that needs no split is finalised in place.
//
// Threads: work items run on the pool (nullptr: the calling thread only).
// Workspace: split-K partial states live there (nullptr: a temporary).
// Every argument is checked before the first read; on error nothing is
// written to outputs or lse.
#include <cstdint>

#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/thread_pool.hpp"
#include "services/executor/workspace.hpp"

namespace kvrt::executor {

// What a decode call traversed, for ledgers and benchmarks (0x0BL:
// "observability").
struct DecodeReceipt {
  uint32_t kernel_block_tokens = 0;  // P_k used [tokens]
  uint64_t kernel_blocks = 0;        // sum over requests and K/V heads of ceil(T / P_k) [blocks]
  uint64_t partitions = 0;           // sum over requests of ceil(T / P_part) [partitions]
  uint64_t kv_rows = 0;              // K/V rows read, per K/V head counted once [rows]
  uint64_t kv_bytes = 0;             // K plus V payload bytes read [bytes]
};

// Errors (before any write): executor_head_mapping, executor_shape_mismatch
// (queries/outputs/lse sizes), kernel_block_not_divisor (P_k vs P_a, or a
// partition size that is not a multiple of P_k), and every refusal of
// check_block_table (visibility, table bounds, padding rows).
Result<DecodeReceipt> paged_decode(const PagedKvView& view, const DecodeArgs& args, ThreadPool* pool = nullptr,
                                   Workspace* workspace = nullptr);
Result<DecodeReceipt> paged_decode(const PagedKvView& view, const DecodeArgs64& args, ThreadPool* pool = nullptr,
                                   Workspace* workspace = nullptr);

}  // namespace kvrt::executor
