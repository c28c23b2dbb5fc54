// See table_entries.hpp.
#include "engine/table_entries.hpp"

namespace kvrt::engine {

Status apply_table_entries(const CacheLayoutManifest& layout, const std::vector<TableEntryUpdate>& entries,
                           model::SequenceBlocks& blocks) {
  const auto& groups = layout.cache_groups;
  if (blocks.slots.size() < groups.size()) blocks.slots.resize(groups.size());
  for (const TableEntryUpdate& e : entries) {
    size_t g = 0;
    while (g < groups.size() && groups[g].group_id != e.handle.group) ++g;
    if (g == groups.size())
      return make_error(ErrorCode::unknown_group, "a receipt names a cache group this layout lacks", "group");
    auto& slots = blocks.slots[g];
    if (slots.size() <= e.logical_block) slots.resize(e.logical_block + 1);
    slots[e.logical_block] = e.handle.block.value;
  }
  return Status::success();
}

}  // namespace kvrt::engine
