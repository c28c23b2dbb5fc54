#pragma once
// StagedModelKvCache: the reference model's K/V for a worker whose node
// keeps its pools where the model cannot compute in place (GPU memory,
// `[node] pool_backend = "cuda"`). The model computes on the CPU over a host
// copy laid out as the pools are (a LocalModelKvCache of the pools' slot
// count, so element offsets and canonical rows agree byte for byte), and
// rows move between the copy and the pools through the pools' store
// (shm/shared_pool_store.hpp), in the canonical row order every store
// shares:
//   - load_rows before the model reads rows another process wrote (a hit,
//     a copy-on-write copy the node made);
//   - store_rows before the worker commits the rows it wrote, so the node's
//     executor and every other worker read them in the pools.
// read_canonical_row answers what the pools hold, not the copy: the
// exactness verdict compares the rows others would reuse.
//
// Over shared-memory pools the same class runs the same moves on the CPU
// (`kvrt run --staged-pools`), which is how the staging is tested where no
// GPU is.
//
// Lifetime: the cache borrows the store, which must outlive it. The copy is
// calloc'd, so it costs the rows the worker touched, not the pools'
// capacity.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/model_kv_cache.hpp"
#include "services/common/result.hpp"
#include "shm/shared_pool_store.hpp"

namespace kvrt::engine {

class StagedModelKvCache final : public model::ModelKvCache {
 public:
  // Errors: the layout's own validation errors; incompatible when the store
  // has another group count ("store.group_count"), block size
  // ("store.block_tokens"), cache group ("store.group") or row size
  // ("store.row_bytes") than the layout; those of LocalModelKvCache::create.
  static Result<std::unique_ptr<StagedModelKvCache>> create(shm::SharedPoolStore& store,
                                                            const CacheLayoutManifest& layout);

  const CacheLayoutManifest& layout() const override { return copy_->layout(); }
  uint32_t slot_count() const override { return copy_->slot_count(); }
  const executor::PagedKvView& layer_view(uint32_t model_layer) const override {
    return copy_->layer_view(model_layer);
  }
  std::byte* writable_k(uint32_t model_layer) override { return copy_->writable_k(model_layer); }
  std::byte* writable_v(uint32_t model_layer) override { return copy_->writable_v(model_layer); }
  // The row in the pools. Errors: those of SharedPoolStore::check_rows, and
  // invalid_argument ("out") when out is not B_row,g bytes.
  Status read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row, std::span<uint8_t> out) const override;

  bool staged() const override { return true; }
  // Every row is located and checked against the store before any moves.
  Status load_rows(const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) override;
  Status store_rows(const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) override;

  StagedModelKvCache(const StagedModelKvCache&) = delete;
  StagedModelKvCache& operator=(const StagedModelKvCache&) = delete;

 private:
  // Rows [first_row, first_row + rows) of one block of one group.
  struct BlockRun {
    uint32_t group_index = 0, slot = 0, first_row = 0, rows = 0;
  };
  StagedModelKvCache(shm::SharedPoolStore& store, std::unique_ptr<model::LocalModelKvCache> copy)
      : store_(&store), copy_(std::move(copy)) {}
  // Store to copy (load) or copy to store, after every run was checked.
  Status move_rows(bool load, const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end);
  // Token rows [begin, end) of every group of `blocks`, block by block.
  Result<std::vector<BlockRun>> runs_of(const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end) const;

  shm::SharedPoolStore* store_;  // borrowed
  std::unique_ptr<model::LocalModelKvCache> copy_;
  std::vector<uint8_t> buffer_;  // one block's canonical rows in transit
};

}  // namespace kvrt::engine
