// See staged_model_kv_cache.hpp.
#include "engine/staged_model_kv_cache.hpp"

#include <algorithm>
#include <string>

namespace kvrt::engine {

Result<std::unique_ptr<StagedModelKvCache>> StagedModelKvCache::create(shm::SharedPoolStore& store,
                                                                       const CacheLayoutManifest& layout) {
  KVRT_TRY(layout.validate());
  const auto& groups = layout.cache_groups;
  auto differs = [](const std::string& what, const std::string& field) {
    return make_error(ErrorCode::incompatible, "the pools' store has another " + what + " than the layout", field);
  };
  if (store.group_count() != groups.size()) return differs("group count", "store.group_count");
  if (store.block_tokens() != layout.allocator_block_size) return differs("block size P_a", "store.block_tokens");
  for (uint32_t g = 0; g < groups.size(); ++g) {
    if (store.group(g) != groups[g].group_id)
      return differs("cache group at index " + std::to_string(g), "store.group");
    if (store.row_bytes(g) != groups[g].row_bytes())
      return differs("row size B_row of group index " + std::to_string(g), "store.row_bytes");
  }
  std::unique_ptr<model::LocalModelKvCache> copy;
  KVRT_TRY_ASSIGN(copy, model::LocalModelKvCache::create(layout, store.capacity_blocks()));
  return std::unique_ptr<StagedModelKvCache>(new StagedModelKvCache(store, std::move(copy)));
}

Status StagedModelKvCache::read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row,
                                              std::span<uint8_t> out) const {
  KVRT_TRY(store_->check_rows(group_index, slot, row, 1));
  if (out.size() != store_->row_bytes(group_index))
    return make_error(ErrorCode::invalid_argument,
                      "a canonical row of group index " + std::to_string(group_index) + " is " +
                          std::to_string(store_->row_bytes(group_index)) + " bytes, not " + std::to_string(out.size()),
                      "out");
  store_->read_rows(group_index, slot, row, 1, out);
  return Status::success();
}

Result<std::vector<StagedModelKvCache::BlockRun>> StagedModelKvCache::runs_of(const model::SequenceBlocks& blocks,
                                                                              uint32_t begin, uint32_t end) const {
  std::vector<BlockRun> runs;
  const uint32_t P = store_->block_tokens();
  for (uint32_t g = 0; g < store_->group_count() && begin < end; ++g) {
    const uint32_t last_block = (end - 1) / P;
    if (g >= blocks.slots.size() || last_block >= blocks.slots[g].size())
      return make_error(
          ErrorCode::coordinate_out_of_range,
          "row " + std::to_string(end - 1) + " of group index " + std::to_string(g) + " lies past the sequence's table",
          "blocks");
    for (uint32_t t = begin; t < end;) {
      const uint32_t first_row = t % P;
      const uint32_t rows = std::min(end - t, P - first_row);
      const BlockRun run{g, blocks.slots[g][t / P], first_row, rows};
      KVRT_TRY(store_->check_rows(run.group_index, run.slot, run.first_row, run.rows));
      runs.push_back(run);
      t += rows;
    }
  }
  return runs;
}

Status StagedModelKvCache::load_rows(const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) {
  return move_rows(true, blocks, begin, end);
}

Status StagedModelKvCache::store_rows(const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) {
  return move_rows(false, blocks, begin, end);
}

Status StagedModelKvCache::move_rows(bool load, const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) {
  std::vector<BlockRun> runs;
  KVRT_TRY_ASSIGN(runs, runs_of(blocks, begin, end));
  for (const BlockRun& run : runs) {
    const uint64_t row_bytes = store_->row_bytes(run.group_index);
    buffer_.resize(row_bytes * run.rows);
    const std::span<uint8_t> rows(buffer_);
    if (load) store_->read_rows(run.group_index, run.slot, run.first_row, run.rows, rows);
    for (uint32_t i = 0; i < run.rows; ++i) {
      const std::span<uint8_t> row = rows.subspan(i * row_bytes, row_bytes);
      KVRT_TRY(load ? model::write_canonical_row(*copy_, run.group_index, run.slot, run.first_row + i, row)
                    : copy_->read_canonical_row(run.group_index, run.slot, run.first_row + i, row));
    }
    if (!load) store_->write_rows(run.group_index, run.slot, run.first_row, run.rows, rows);
  }
  return Status::success();
}

}  // namespace kvrt::engine
