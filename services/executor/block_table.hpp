#pragma once
// One request's block table for one cache group, as a paged kernel walks it
// (spec 0x0A, 0x0AC): physical slots in logical order, each with its
// descriptor's committed rows, plus the request-visible context length. The
// identity/generation checks of 0x03I happen once, when a table is resolved
// from a TranslationSnapshot; the kernel then hoists what it needs per block
// instead of re-checking every lane (0x0A: "hoists the same metadata").
//
// Three levels (0x0A): allocator blocks of P_a rows (the table's entries),
// kernel blocks of P_k rows (P_k | P_a; allocator entry a is read as kernel
// blocks a*q .. a*q+q-1 with q = P_a / P_k, 0x0AC), and reduction partitions
// of P_part rows (P_k | P_part).
//
// A kernel must never read padding rows of a partially filled block: they may
// hold stale rows of a recycled block (0x0AC). check_block_table() refuses a
// table whose visible rows in some block exceed that block's committed rows.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "services/address/translation_snapshot.hpp"
#include "services/common/result.hpp"
#include "services/executor/kv_view.hpp"

namespace kvrt::executor {

struct KvBlockTable {
  std::span<const uint32_t> slots;       // logical allocator block j -> physical slot [slot index]
  std::span<const uint32_t> valid_rows;  // committed rows of that block [rows], the physical frontier (0x03C)
  uint64_t context_tokens = 0;           // request-visible rows T [tokens] (0x03G)
};

// An owning table, resolved from a snapshot at one table version.
struct ResolvedBlockTable {
  RequestId request_id;
  TableVersion table_version;
  CacheGroupId group;
  std::vector<uint32_t> slots;
  std::vector<uint32_t> valid_rows;
  uint64_t context_tokens = 0;

  KvBlockTable view() const { return KvBlockTable{slots, valid_rows, context_tokens}; }
};

// Resolves the current version of `request`'s table for `group` through the
// group pool's descriptors. Rejections follow 0x03I's order and codes:
// unknown_request, stale_table_version (the current version is not
// `expected_version`), unknown_group, table_out_of_bounds (the table is shorter
// than ceil(T / P_a)), unknown_physical / stale_physical (an entry the kernel
// would read names no current descriptor). Entries past the context are not
// resolved, since no kernel reads them.
Result<ResolvedBlockTable> resolve_block_table(const TranslationSnapshot& snapshot, std::string_view request,
                                               CacheGroupId group,
                                               std::optional<TableVersion> expected_version = std::nullopt);

// Every check a paged kernel needs before its first read, for a pool view and
// a kernel block size P_k (0 means P_k = P_a). `field` prefixes error fields.
// Errors: kernel_block_not_divisor (P_k does not divide P_a),
// executor_frontier_mismatch (T = 0: nothing to attend),
// executor_shape_mismatch (slots and valid_rows differ in length),
// table_out_of_bounds (fewer than ceil(T / P_a) entries),
// coordinate_out_of_range (a slot outside the pool, or valid rows above P_a),
// row_not_valid (the visible rows of a block exceed its committed rows: the
// read would consume padding rows).
Status check_block_table(const KvBlockTable& table, const PagedKvView& view, uint32_t kernel_block_tokens,
                         const std::string& field);

// P_k for a view and an option value (0 = P_a); kernel_block_not_divisor when
// P_k does not divide P_a.
Result<uint32_t> kernel_block_tokens_for(const PagedKvView& view, uint32_t requested);

// One kernel block of a request: where its rows start and how many are
// visible (the last block of a context may be partial).
struct KernelBlock {
  uint32_t slot = 0;       // physical slot [slot index]
  uint32_t first_row = 0;  // row inside the allocator block, (j mod q) * P_k [rows]
  uint32_t rows = 0;       // visible rows, <= P_k [rows]
};
// Kernel block j of a checked table (j < ceil(T / P_k)).
inline KernelBlock kernel_block(const KvBlockTable& table, uint32_t allocator_block_tokens,
                                uint32_t kernel_block_tokens, uint64_t j) {
  const uint64_t q = allocator_block_tokens / kernel_block_tokens;
  const uint64_t start = j * kernel_block_tokens;
  const uint64_t left = table.context_tokens - start;
  return KernelBlock{table.slots[j / q], static_cast<uint32_t>((j % q) * kernel_block_tokens),
                     static_cast<uint32_t>(left < kernel_block_tokens ? left : kernel_block_tokens)};
}

}  // namespace kvrt::executor
