#pragma once
// The flat, device-ready form of one attention launch: plain structs of
// 32-bit fields that the host planner (attention_work_plan.hpp) fills and the
// CUDA kernels (gpu/cuda_attention_shim.cu) read straight from device memory.
// Only <cstdint> here: nvcc compiles this header too (docs/stack-notes.md: nothing that
// reaches Cap'n Proto or fmt may enter a .cu file).
//
// Vocabulary (spec 0x0A, 0x0BA-0x0BD):
//   chunk    a run of key positions read by the sequences of its coverage
//            interval, stored as row runs inside pool blocks. Ordinary paged
//            decode is the degenerate case: one private chunk per request.
//   partial  one (O, LSE) state of one sequence over one partition of one
//            chunk, for all H_q query heads: partial_o[p][H_q][d_v],
//            partial_lse[p][H_q]. Every sequence's partials tile its legal
//            keys [0, T) exactly once, and the merge combines them with the
//            exact log-sum-exp merge (0x0BA).
#include <cstdint>

namespace kvrt::executor {

// Rows [first_row, first_row + rows) of the block in `slot`, holding the
// chunk's keys [key_begin, key_begin + rows) (chunk-relative).
struct PlanRowRun {
  uint32_t slot = 0;       // [slot index]
  uint32_t first_row = 0;  // [rows]
  uint32_t rows = 0;       // [rows]
  uint32_t key_begin = 0;  // [keys], chunk-relative
};

struct PlanChunk {
  uint32_t run_begin = 0;  // index of its first PlanRowRun
  uint32_t run_count = 0;
  uint32_t tokens = 0;          // T_c [keys]
  uint32_t coverage_begin = 0;  // sequences [coverage_begin, coverage_end) read it
  uint32_t coverage_end = 0;
};

// Sequence-first work (ChunkAttention's second phase; all of ordinary paged
// decode): one sequence's query heads of one K/V head group over keys
// [key_begin, key_begin + key_count) of one chunk, written to `partial`.
struct PlanSequenceItem {
  uint32_t chunk = 0;
  uint32_t sequence = 0;
  uint32_t key_begin = 0;  // [keys], chunk-relative
  uint32_t key_count = 0;  // [keys], >= 1
  uint32_t partial = 0;
};

// Chunk-first work (Hydragen's batched product; ChunkAttention's first phase
// for chunks above the threshold): sequences [sequence_begin, sequence_begin
// + sequence_count) of the chunk's coverage, all of their query heads of one
// K/V head group, as one matrix product over keys [key_begin, key_begin +
// key_count). Sequence s writes partial `partial + (s - sequence_begin)`.
struct PlanTileItem {
  uint32_t chunk = 0;
  uint32_t key_begin = 0;  // [keys], chunk-relative
  uint32_t key_count = 0;  // [keys], >= 1
  uint32_t sequence_begin = 0;
  uint32_t sequence_count = 0;  // >= 1
  uint32_t partial = 0;
};

}  // namespace kvrt::executor
