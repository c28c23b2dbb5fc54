#pragma once
// The prefix tree of a shared-prefix batch, built from the requests' own
// block tables (0x0BB): requests that name the same physical block at the
// same logical position, with the same rows read from it, share that
// block's K/V, so a trie over (slot, rows) per position, compressed into
// chunks wherever the set of sequences reading on does not change, is the
// snapshot Hydragen and ChunkAttention execute. Sequences are ordered by a
// depth-first walk of the trie (a sequence that ends at a node before the
// node's children, children by key), so every chunk's readers are one
// contiguous interval of sequence indices, as the kernels need (0x0BB).
//
// Multi-level trees come out as they are: a system prompt shared by all,
// then a document shared by some, then private questions is three levels.
#include <cstdint>
#include <span>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"
#include "services/executor/execution_snapshot.hpp"

namespace kvrt::executor {

// One request's blocks in one cache group, as the allocator resolved them.
struct MemberBlocks {
  RequestId request;
  TableVersion table_version;
  std::vector<uint32_t> slots;  // per logical block
  std::vector<uint32_t> valid;  // committed rows per block [rows]
  uint64_t context_tokens = 0;  // keys its query attends [tokens]
};

struct SharedPrefixPlan {
  ExecutionSnapshot snapshot;                // coverage assigned; sequence order = depth-first order
  std::vector<uint32_t> member_of_sequence;  // snapshot sequence i is members[member_of_sequence[i]]
  uint32_t levels = 0;                       // most shared chunks on one sequence's path [chunks]
  uint32_t shared_chunks = 0;                // chunks read by more than one sequence [chunks]
};

// Errors: invalid_argument (no member; a context of 0 or past its blocks;
// a request named twice; slots and valid rows of different lengths).
Result<SharedPrefixPlan> plan_shared_prefix(std::span<const MemberBlocks> members, uint32_t block_tokens,
                                            const ExecutionContract& contract);

}  // namespace kvrt::executor
