#pragma once
// The kernel executor owner (spec 0x0A-0x0BN), CPU side: one include
// for a caller (the executor's actor, the reference model of engine/model/).
// Plain C++: no CAF, no Cap'n Proto, no CUDA.
//
// Reading K/V (where the allocator and mapper put it):
//   kv_view.hpp            PagedKvView: base pointers + element strides of one
//                          layer's K and V tensors; factories from the address
//                          translator's TensorGeometry (shm pools), from a
//                          TranslationSnapshot, for plain buffers, and for the
//                          mapper's contiguous virtual tensors.
//   block_table.hpp        KvBlockTable (slots + committed rows + visible T),
//                          resolve_block_table() from a TranslationSnapshot,
//                          check_block_table(), kernel blocks of P_k | P_a.
//   allocator_block_table.hpp  the same table from a BlockAllocator.
//
// Attention (T = float: FP32 accumulation; T = double: the FP64 mode):
//   attention_args.hpp     HeadMapping (GQA), AttentionOptions (P_k, P_part),
//                          DecodeArgs / PrefillArgs, accuracy contract.
//   paged_decode.hpp       paged_decode(): split-K + exact reduction.
//   paged_prefill.hpp      paged_prefill(): suffix over a cached prefix,
//                          causal, chunked.
//   contiguous_decode.hpp  contiguous_decode(): vAttention path.
//   execution_snapshot.hpp ExecutionSnapshot (+ validate, validate_for,
//                          digest, assign_coverage), SnapshotFence.
//   hydragen_attention.hpp hydragen_attention() over a snapshot.
//   chunk_attention.hpp    chunk_attention() over a snapshot.
//   shared_prefix_ledger.hpp  the 0x0BE / 0x0BI ledgers of a snapshot.
//   shared_prefix_workload.hpp  the regular B x (S + U_r) workload builder.
//   reference_attention.hpp    the FP64 monolithic reference (for tests and
//                              for checking other backends, e.g. gpu/).
//
// Execution resources:
//   thread_pool.hpp        ThreadPool (std::jthread workers).
//   workspace.hpp          Workspace: partial-state buffers kept across calls.
//   online_softmax.hpp     partition states and the exact LSE merge.
//   scalar_convert.hpp     fp16 / bf16 conversions (round to nearest even).
//   blocked_matmul.hpp     the FP32 matrix multiply of the benchmark's roof.
//
// Every entry point checks all of its arguments before the first read and
// returns a typed kvrt::Error naming the field (state unchanged, nothing
// written); see the failure labs in tests/executor_failure_lab_test.cpp.
#include "services/executor/allocator_block_table.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/block_table.hpp"
#include "services/executor/blocked_matmul.hpp"
#include "services/executor/chunk_attention.hpp"
#include "services/executor/contiguous_decode.hpp"
#include "services/executor/execution_snapshot.hpp"
#include "services/executor/hydragen_attention.hpp"
#include "services/executor/kv_view.hpp"
#include "services/executor/online_softmax.hpp"
#include "services/executor/paged_decode.hpp"
#include "services/executor/paged_prefill.hpp"
#include "services/executor/reference_attention.hpp"
#include "services/executor/scalar_convert.hpp"
#include "services/executor/shared_prefix_ledger.hpp"
#include "services/executor/shared_prefix_workload.hpp"
#include "services/executor/thread_pool.hpp"
#include "services/executor/workspace.hpp"
