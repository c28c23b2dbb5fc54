#include "tools/ledger/request_view.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

#include "services/common/units.hpp"

namespace kvrt {
namespace {

std::string request_field(size_t i, const char* member) { return "requests[" + std::to_string(i) + "]." + member; }

Error bad(std::string reason, std::string field) {
  return make_error(ErrorCode::invalid_argument, std::move(reason), std::move(field));
}

std::string label_for(size_t i) {
  if (i < 26) return std::string(1, static_cast<char>('A' + i));
  return std::string(1, 'R').append(std::to_string(i));  // GCC 12 -Wrestrict misfires on "R" + string
}

}  // namespace

uint64_t visible_rows(const RequestView& view, size_t index, uint32_t block_rows) {
  const uint64_t start = uint64_t{index} * block_rows;
  if (start >= view.committed_rows) return 0;
  return std::min<uint64_t>(block_rows, view.committed_rows - start);
}

Status validate_request_views(const std::vector<RequestView>& views, uint32_t block_rows) {
  if (block_rows == 0) return bad("block size P must be positive", "block_rows");
  if (views.empty()) return bad("a ledger needs at least one live request", "requests");
  if (views.size() > kMaxLedgerRequests)
    return bad(
        std::to_string(views.size()) + " requests exceed the ledger bound of " + std::to_string(kMaxLedgerRequests),
        "requests");
  std::set<RequestId> ids;
  std::unordered_map<PhysicalBlockId, size_t> logical_index_of;  // block -> index in every table
  uint64_t references = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    const RequestView& v = views[i];
    if (!ids.insert(v.request).second)
      return bad("request id " + std::to_string(v.request.value) + " appears twice", request_field(i, "request"));
    if (v.committed_rows == 0)
      return bad("a live request has at least one committed row", request_field(i, "committed_rows"));
    if (v.reserved_rows < v.committed_rows)
      return bad("reserved rows " + std::to_string(v.reserved_rows) + " < committed rows " +
                     std::to_string(v.committed_rows) + " (T_max,r >= T_r)",
                 request_field(i, "reserved_rows"));
    const uint64_t needed = ceil_div(v.committed_rows, block_rows);
    if (v.blocks.size() != needed)
      return bad("table has " + std::to_string(v.blocks.size()) + " blocks but ceil(" +
                     std::to_string(v.committed_rows) + " / " + std::to_string(block_rows) +
                     ") = " + std::to_string(needed),
                 request_field(i, "blocks"));
    references += v.blocks.size();
    if (references > kMaxLedgerReferenceBlocks)
      return bad("block-table references exceed the ledger bound of " + std::to_string(kMaxLedgerReferenceBlocks),
                 "requests");
    std::set<PhysicalBlockId> own;
    for (size_t j = 0; j < v.blocks.size(); ++j) {
      const PhysicalBlockId p = v.blocks[j];
      const std::string field = request_field(i, "blocks") + "[" + std::to_string(j) + "]";
      if (!own.insert(p).second) return bad("block " + std::to_string(p.value) + " appears twice in one table", field);
      auto [it, fresh] = logical_index_of.emplace(p, j);
      if (!fresh && it->second != j)
        return bad("block " + std::to_string(p.value) + " is logical block " + std::to_string(j) +
                       " here but logical block " + std::to_string(it->second) +
                       " in another table; a shared block holds one token range",
                   field);
    }
  }
  return Status::success();
}

ValidRowsByBlock derive_valid_rows(const std::vector<RequestView>& views, uint32_t block_rows) {
  ValidRowsByBlock valid;
  for (const RequestView& v : views)
    for (size_t j = 0; j < v.blocks.size(); ++j) {
      uint64_t& rows = valid[v.blocks[j]];
      rows = std::max(rows, visible_rows(v, j, block_rows));
    }
  return valid;
}

Result<std::vector<RequestView>> build_request_family(const RequestFamilySpec& spec) {
  if (spec.block_rows == 0) return bad("block size P must be positive", "block_rows");
  if (spec.lengths.empty()) return bad("at least one request length is required", "lengths");
  if (spec.lengths.size() > kMaxLedgerRequests)
    return bad(std::to_string(spec.lengths.size()) + " requests exceed the ledger bound of " +
                   std::to_string(kMaxLedgerRequests),
               "lengths");
  if (spec.reserved_rows.size() != spec.lengths.size())
    return bad(std::to_string(spec.reserved_rows.size()) + " reserved-row entries for " +
                   std::to_string(spec.lengths.size()) + " lengths",
               "reserved_rows");
  // Bound the block counts before allocating any table: a huge length is a
  // caller error, not an out-of-memory.
  uint64_t references = 0;
  uint64_t longest_blocks = 0;
  for (size_t i = 0; i < spec.lengths.size(); ++i) {
    const std::string at = std::string(1, '[').append(std::to_string(i)).append("]");
    if (spec.lengths[i] == 0) return bad("a request length must be at least 1 row", "lengths" + at);
    if (spec.reserved_rows[i] < spec.lengths[i])
      return bad("reserved rows " + std::to_string(spec.reserved_rows[i]) + " < length " +
                     std::to_string(spec.lengths[i]) + " (T_max,r >= T_r)",
                 "reserved_rows" + at);
    const uint64_t blocks = ceil_div(spec.lengths[i], spec.block_rows);
    if (blocks > kMaxLedgerReferenceBlocks || references + blocks > kMaxLedgerReferenceBlocks)
      return bad("block-table references exceed the ledger bound of " + std::to_string(kMaxLedgerReferenceBlocks),
                 "lengths" + at);
    references += blocks;
    longest_blocks = std::max(longest_blocks, blocks);
  }
  const uint64_t ids_needed = spec.sharing == PrefixSharing::nested_shared_prefix ? longest_blocks : references;
  if (ids_needed > uint64_t{std::numeric_limits<uint32_t>::max()} - spec.first_block_id)
    return bad("block ids from " + std::to_string(spec.first_block_id) + " would pass 2^32 - 1", "first_block_id");

  std::vector<RequestView> views;
  uint32_t next_private = spec.first_block_id;
  for (size_t i = 0; i < spec.lengths.size(); ++i) {
    RequestView v;
    v.request = RequestId{i};
    v.label = label_for(i);
    v.committed_rows = spec.lengths[i];
    v.reserved_rows = spec.reserved_rows[i];
    const uint64_t blocks = ceil_div(v.committed_rows, spec.block_rows);
    for (uint64_t j = 0; j < blocks; ++j) {
      // Shared: logical block j of every request is the longest path's block j.
      const uint32_t id = spec.sharing == PrefixSharing::nested_shared_prefix
                              ? spec.first_block_id + static_cast<uint32_t>(j)
                              : next_private++;
      v.blocks.push_back(PhysicalBlockId{id});
    }
    views.push_back(std::move(v));
  }
  return views;
}

}  // namespace kvrt
