#pragma once
// The checked plan of one ReferenceModel::forward() call, internal
// to engine/model/: every argument is checked here, before the model writes
// a single K/V row, so a refused call leaves the cache as it was.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/reference_model.hpp"
#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::model {

struct ForwardPlan {
  // One computed token row: chunks in order, each chunk's suffix rows
  // [first_row, tokens.size()) in order. Row r of the activations is rows[r].
  struct Row {
    uint32_t chunk = 0;
    uint32_t position = 0;  // absolute position in its sequence [tokens]
  };
  std::vector<Row> rows;
  std::vector<uint64_t> last_row;  // [chunk] index into rows of the chunk's last row
  // [group][chunk][logical block] rows of the block committed once this
  // call has written its rows: min(P_a, T - j * P_a), the physical frontier
  // (0x03C) that attention may read up to.
  std::vector<std::vector<std::vector<uint32_t>>> valid_rows;
  // [group][chunk] one paged_prefill request per chunk: the first
  // ceil(T / P_a) slots of the chunk's table and valid_rows above,
  // context T = tokens.size(), suffix T - first_row. The spans point into
  // the chunks' SequenceBlocks and into valid_rows (stable under moves).
  std::vector<std::vector<executor::PrefillRequest>> requests;
};

// Checks, for every chunk c in order (errors name "chunks[c]..."):
//   blocks null                      invalid_argument      .blocks
//   first_row >= tokens.size()       executor_frontier_mismatch  .first_row
//   more than 2^31 tokens            invalid_argument      .tokens
//   positions of another length      invalid_argument      .positions
//   positions not increasing         invalid_argument      .positions[i]
//   token outside [0, vocab)         invalid_argument      .tokens[i]
//   table count != group count       unknown_group         .blocks.slots
//   table shorter than ceil(T / P_a) table_out_of_bounds   .blocks.slots[g]
//   slot >= slot_count               coordinate_out_of_range  .blocks.slots[g][j]
// and then, across chunks, that no (group, slot, row) is written twice and
// that no row a chunk reads as its prefix is written by this call
// (invalid_argument naming the later block): either would make a row's
// bits depend on the batch, or on the order threads run in.
Result<ForwardPlan> plan_forward(const CacheLayoutManifest& layout, uint32_t vocab, uint32_t slot_count,
                                 std::span<const ForwardChunk> chunks);

}  // namespace kvrt::model
