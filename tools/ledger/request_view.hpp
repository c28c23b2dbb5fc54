#pragma once
// Request views for the byte ledgers (spec 0x02B-0x02D): what each live request
// sees (T_r committed rows), what a rectangular allocator would have reserved
// for it (T_max,r rows), and which physical blocks its block table names.
//
// A physical block holds one token range: if two requests both name block p it
// must sit at the same logical index in both tables (the shared rows are the
// same exact prefix), and each request sees only its own visible rows of it
// (0x03G: request visibility is stricter than physical validity).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/common/ids.hpp"
#include "services/common/result.hpp"

namespace kvrt {

struct RequestView {
  RequestId request;
  std::string label;                    // "A", "B", ... (reports only)
  uint64_t committed_rows = 0;          // T_r [rows], > 0
  uint64_t reserved_rows = 0;           // T_max,r [rows], >= T_r
  std::vector<PhysicalBlockId> blocks;  // B_r in logical order; ceil(T_r / P) entries
};

// Physical block -> v_p, its initialized rows [rows].
using ValidRowsByBlock = std::map<PhysicalBlockId, uint64_t>;

// Bounds that keep every ledger allocation and sum small and exact.
inline constexpr size_t kMaxLedgerRequests = 4096;
inline constexpr uint64_t kMaxLedgerReferenceBlocks = uint64_t{1} << 22;  // sum_r |B_r| [blocks]

// Rows of logical block `index` that `view` can see: min(P, T_r - index * P).
uint64_t visible_rows(const RequestView& view, size_t index, uint32_t block_rows);

// Checks the views against block size P: at least one request, unique request
// ids, 0 < T_r <= T_max,r, |B_r| == ceil(T_r / P), no block twice in one table,
// a shared block at one logical index only, and the size bounds above. Errors are
// invalid_argument naming the field ("requests[1].reserved_rows").
Status validate_request_views(const std::vector<RequestView>& views, uint32_t block_rows);

// v_p = max over requests of the rows they see in p. For a nested exact-prefix
// family this is exactly what the longest request materialized (0x0D).
ValidRowsByBlock derive_valid_rows(const std::vector<RequestView>& views, uint32_t block_rows);

enum class PrefixSharing : uint8_t {
  private_blocks,        // no sharing: every request owns fresh blocks (the 0x02C baseline)
  nested_shared_prefix,  // every shorter request is an exact prefix of the longest (0x0D)
};

struct RequestFamilySpec {
  std::vector<uint64_t> lengths;        // T_r [rows], request order A, B, C, ...
  std::vector<uint64_t> reserved_rows;  // T_max,r [rows], one per length
  uint32_t block_rows = 16;             // P [rows / block]
  uint32_t first_block_id = 100;        // the 0x0D fixture numbers its blocks from 100
  PrefixSharing sharing = PrefixSharing::nested_shared_prefix;
};

// Builds the request views of a family. Shared: the longest request owns blocks
// first_block_id, first_block_id+1, ... and every request names the first
// ceil(T_r / P) of them. Private: requests take consecutive fresh ids in order.
// Errors (invalid_argument) name "lengths[i]", "reserved_rows[i]" or the bound hit.
Result<std::vector<RequestView>> build_request_family(const RequestFamilySpec& spec);

}  // namespace kvrt
