#pragma once
// An allocation receipt's table entries (published_entries) applied to a
// request's block table in the node's pools, as the model cache addresses
// them: both engine loops read their requests' blocks this way.
#include <vector>

#include "engine/model/model_kv_cache.hpp"
#include "schema/allocator_types.hpp"

namespace kvrt::engine {

// Writes each entry's block into `blocks` at (its group's index in
// `layout`, its logical block), growing the table as needed; the node's
// pools use block id == slot. Errors: unknown_group ("group") for an entry
// of a group the layout lacks; `blocks` may then hold the entries before it.
Status apply_table_entries(const CacheLayoutManifest& layout, const std::vector<TableEntryUpdate>& entries,
                           model::SequenceBlocks& blocks);

}  // namespace kvrt::engine
