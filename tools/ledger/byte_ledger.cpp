#include "tools/ledger/byte_ledger.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

namespace kvrt {
namespace {

// What the views say about one physical block.
struct BlockTally {
  uint64_t references = 0;   // tables naming the block
  uint64_t visible_sum = 0;  // rows of it seen, summed over those tables
  uint64_t visible_max = 0;  // most rows any one table sees
};

Error bad(std::string reason, std::string field) {
  return make_error(ErrorCode::invalid_argument, std::move(reason), std::move(field));
}

std::string block_field(PhysicalBlockId p) { return "valid_rows[" + std::to_string(p.value) + "]"; }

// Explicit v_p must cover exactly the referenced blocks and lie in
// [most rows any request sees, P]: below that a request would read rows the
// block never committed (0x03G); above P is not a block.
Status check_valid_rows(const ValidRowsByBlock& valid, const std::map<PhysicalBlockId, BlockTally>& tallies,
                        uint32_t block_rows) {
  for (const auto& [p, rows] : valid)
    if (!tallies.contains(p))
      return bad("block " + std::to_string(p.value) + " has valid rows but no live request references it",
                 block_field(p));
  for (const auto& [p, tally] : tallies) {
    auto it = valid.find(p);
    if (it == valid.end())
      return bad("referenced block " + std::to_string(p.value) + " has no valid-row count", block_field(p));
    if (it->second > block_rows)
      return bad(std::to_string(it->second) + " valid rows exceed P = " + std::to_string(block_rows), block_field(p));
    if (it->second < tally.visible_max)
      return bad("a request sees " + std::to_string(tally.visible_max) + " rows of block " + std::to_string(p.value) +
                     " but only " + std::to_string(it->second) + " are valid",
                 block_field(p));
  }
  return Status::success();
}

}  // namespace

Result<ByteLedgers> compute_byte_ledgers(const CacheLayoutManifest& manifest, const LedgerInput& input) {
  ByteLedgers out;
  KVRT_TRY_ASSIGN(out.row, derive_row_ledger(manifest));
  const uint32_t P = out.row.block_rows;
  const uint64_t B = out.row.row_bytes;
  KVRT_TRY(validate_request_views(input.requests, P));
  KVRT_TRY(validate_record_sizes(input.record_sizes));

  std::map<PhysicalBlockId, BlockTally> tallies;
  uint64_t reference_blocks = 0;
  unsigned __int128 reserved_rows = 0;
  for (const RequestView& v : input.requests) {
    reserved_rows += v.reserved_rows;
    reference_blocks += v.blocks.size();
    for (size_t j = 0; j < v.blocks.size(); ++j) {
      BlockTally& t = tallies[v.blocks[j]];
      const uint64_t seen = visible_rows(v, j, P);
      t.references += 1;
      t.visible_sum += seen;
      t.visible_max = std::max(t.visible_max, seen);
    }
  }
  const ValidRowsByBlock valid = input.valid_rows ? *input.valid_rows : derive_valid_rows(input.requests, P);
  if (input.valid_rows) KVRT_TRY(check_valid_rows(valid, tallies, P));

  if (input.pool_blocks > kMaxLedgerPoolBlocks)
    return bad(
        std::to_string(input.pool_blocks) + " pool blocks exceed the bound of " + std::to_string(kMaxLedgerPoolBlocks),
        "pool_blocks");
  if (input.pool_blocks < tallies.size())
    return bad("pool of " + std::to_string(input.pool_blocks) + " blocks cannot hold " +
                   std::to_string(tallies.size()) + " live unique blocks",
               "pool_blocks");
  // Every row figure is at most max(sum T_max, N_ref * P, N_pool * P); bound its
  // byte product once so that no later multiplication can overflow (signed
  // deduplicated bytes included).
  const unsigned __int128 max_rows = std::max({reserved_rows, static_cast<unsigned __int128>(reference_blocks) * P,
                                               static_cast<unsigned __int128>(input.pool_blocks) * P});
  if (max_rows * B > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()))
    return bad("ledger byte figures would exceed 2^63 - 1 bytes", "requests");

  // 0x02B: per request.
  RectangularLedger& rect = out.rectangular;
  for (const RequestView& v : input.requests) {
    rect.logical_rows += v.committed_rows;
    rect.reserved_rows += v.reserved_rows;
    rect.slack_rows += v.reserved_rows - v.committed_rows;
  }
  rect.logical_bytes = rect.logical_rows * B;
  rect.reserved_bytes = rect.reserved_rows * B;
  rect.slack_bytes = rect.slack_rows * B;

  // 0x02C: per block-table reference.
  PagedRequestViewLedger& view = out.request_view;
  for (const RequestView& v : input.requests)
    for (size_t j = 0; j < v.blocks.size(); ++j) {
      const uint64_t seen = visible_rows(v, j, P);
      view.reference_blocks += 1;
      view.logical_rows += seen;
      view.tail_rows += P - seen;
    }
  view.slot_rows = view.reference_blocks * P;
  view.capacity_bytes = view.slot_rows * B;
  view.logical_bytes = view.logical_rows * B;
  view.tail_bytes = view.tail_rows * B;

  // 0x02D: per unique physical block, and the two savings ledgers.
  UniquePhysicalLedger& uniq = out.unique;
  SharingSavings& save = out.savings;
  for (const auto& [p, tally] : tallies) {
    const uint64_t v_p = valid.at(p);
    uniq.block_ids.push_back(p);
    uniq.materialized_rows += v_p;
    uniq.tail_rows += P - v_p;
    if (v_p == P) uniq.full_blocks += 1;
    save.deduplicated_rows += static_cast<int64_t>(tally.visible_sum) - static_cast<int64_t>(v_p);
    save.avoided_blocks += tally.references - 1;
  }
  uniq.unique_blocks = uniq.block_ids.size();
  uniq.slot_rows = uniq.unique_blocks * P;
  uniq.capacity_bytes = uniq.slot_rows * B;
  uniq.materialized_bytes = uniq.materialized_rows * B;
  uniq.tail_bytes = uniq.tail_rows * B;
  save.deduplicated_bytes = save.deduplicated_rows * static_cast<int64_t>(B);
  save.avoided_rows = save.avoided_blocks * P;
  save.avoided_bytes = save.avoided_rows * B;

  // 0x02C pool: provisioned = live unique + idle.
  PoolLedger& pool = out.pool;
  pool.provisioned_blocks = input.pool_blocks;
  pool.live_blocks = uniq.unique_blocks;
  pool.idle_blocks = input.pool_blocks - uniq.unique_blocks;
  pool.provisioned_bytes = pool.provisioned_blocks * out.row.block_bytes;
  pool.live_bytes = pool.live_blocks * out.row.block_bytes;
  pool.idle_bytes = pool.idle_blocks * out.row.block_bytes;

  // 0x02E / 0x09B metadata: one record per table entry, provisioned block, full
  // unique block (hash), live request and free block.
  out.metadata = compute_metadata_ledger(input.record_sizes, MetadataCounts{.request_block_refs = view.reference_blocks,
                                                                            .pool_blocks = pool.provisioned_blocks,
                                                                            .cached_hashes = uniq.full_blocks,
                                                                            .live_requests = input.requests.size(),
                                                                            .free_queue_entries = pool.idle_blocks});
  return out;
}

}  // namespace kvrt
