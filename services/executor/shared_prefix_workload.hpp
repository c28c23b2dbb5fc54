#pragma once
// The regular shared-prefix workload of spec 0x0BI (and of `kvrt bench
// attention`): B sequences share an S-token prefix and each owns a private
// suffix of U_r tokens. The builder cuts the prefix into ceil(S / P_c) chunks
// covering all B sequences and each suffix into ceil(U_r / P_c) private
// chunks, and lays every chunk out in a plain pool, each chunk starting on a
// fresh block of P_a rows. It also emits, for the ordinary paged-decode
// baseline, each sequence's block table: the same physical blocks, shared
// prefix blocks referenced by every table (storage reuse without execution
// reuse, 0x0B). Tables need every chunk but a path's last to end on a block
// boundary (P_a | P_c); otherwise `tables` stays empty.
#include <cstdint>
#include <vector>

#include "services/common/result.hpp"
#include "services/executor/attention_args.hpp"
#include "services/executor/execution_snapshot.hpp"

namespace kvrt::executor {

struct SharedPrefixShape {
  uint32_t prefix_tokens = 0;           // S [tokens]
  std::vector<uint32_t> suffix_tokens;  // U_r [tokens], one per sequence (B = size)
  uint32_t chunk_tokens = 0;            // P_c [tokens]
  uint32_t block_tokens = 16;           // P_a of the pool [tokens / block]
  ExecutionContract contract;           // heads, widths, dtypes, tau
  uint64_t tree_version = 1;
};

struct SharedPrefixWorkload {
  ExecutionSnapshot snapshot;                      // coverage assigned, validates
  uint32_t slot_count = 0;                         // pool blocks the layout uses [blocks]
  std::vector<std::vector<uint32_t>> table_slots;  // per sequence, when aligned
  std::vector<std::vector<uint32_t>> table_valid;  // committed rows per entry
  // Block tables over table_slots/table_valid (views into this object).
  std::vector<DecodeRequest> tables() const;
};

// Errors: invalid_argument for a zero size or no sequence.
Result<SharedPrefixWorkload> build_shared_prefix_workload(const SharedPrefixShape& shape);

}  // namespace kvrt::executor
