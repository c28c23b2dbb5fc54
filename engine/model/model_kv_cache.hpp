#pragma once
// Where the reference model's K/V lives. The model reads and writes
// one model layer at a time through the layer's PagedKvView (kv_view.hpp:
// base + strides, any declared axis order), and a checker reads whole token
// rows in the canonical order of services/allocator/payload_store.hpp (per
// token K then V, each layer_local-major, then kv_head, then lane), which is
// what two caches compare bitwise.
//
// Two implementations share the interface:
//   - LocalModelKvCache (here): process-private pools with the layout's
//     geometry, for the no-reuse, no-sharing reference run of the exactness
//     verdict;
//   - shm/shm_model_kv_cache.hpp: the node's shared-memory pools attached by
//     a worker (ShmPayloadStore), where reused rows written by other
//     processes are read.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "services/common/result.hpp"
#include "services/executor/kv_view.hpp"
#include "services/identity/cache_layout_manifest.hpp"

namespace kvrt::model {

// A sequence's physical slots: slots[g][j] is the slot of logical block j in
// the pool of group index g (the manifest's cache_groups order).
struct SequenceBlocks {
  std::vector<std::vector<uint32_t>> slots;
};

class ModelKvCache {
 public:
  virtual ~ModelKvCache() = default;
  virtual const CacheLayoutManifest& layout() const = 0;
  virtual uint32_t slot_count() const = 0;  // slots per group pool [blocks]
  // The view of one model layer; its bytes are writable by this process for
  // as long as the cache lives (the model stores K/V rows through it).
  virtual const executor::PagedKvView& layer_view(uint32_t model_layer) const = 0;
  // Mutable base pointers of the same view (K, V) for the model's stores.
  virtual std::byte* writable_k(uint32_t model_layer) = 0;
  virtual std::byte* writable_v(uint32_t model_layer) = 0;
  // One token row of group index g in canonical order (B_row,g bytes).
  // Errors: unknown_group, coordinate_out_of_range ("slot", "row").
  virtual Status read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row,
                                    std::span<uint8_t> out) const = 0;

  // A cache whose views are a host copy of pools that live elsewhere (GPU
  // memory: engine/staged_model_kv_cache.hpp) moves token rows [begin, end)
  // of a sequence between the pools and its copy. The engine loads rows
  // before the model reads what another process wrote there (a hit, a
  // copy-on-write copy) and stores the rows it wrote before committing them
  // for others to read. A cache whose views are the pools themselves has
  // nothing to move. Errors: coordinate_out_of_range ("blocks") for rows
  // past the table, and the pools' own errors; a refused move moves nothing.
  virtual bool staged() const { return false; }
  virtual Status load_rows(const SequenceBlocks& /*blocks*/, uint32_t /*begin*/, uint32_t /*end*/) {
    return Status::success();
  }
  virtual Status store_rows(const SequenceBlocks& /*blocks*/, uint32_t /*begin*/, uint32_t /*end*/) {
    return Status::success();
  }
};

// One token row of `group` in canonical order, gathered from the per-layer
// views of a cache (views indexed by model layer) at (slot, row). The caller
// has checked the coordinates and that `out` holds B_row,g bytes; every cache
// implementation gathers through this one function, so their rows compare
// bitwise whenever their elements are equal.
void gather_canonical_row(const CacheGroupLayout& group, std::span<const executor::PagedKvView> views, uint32_t slot,
                          uint32_t row, std::span<uint8_t> out);

// Copies token rows [begin, end) of every cache group, K and V of every
// layer and head, from `from` (the sequence at `from_blocks`) into `to` (at
// `to_blocks`): how a hit read in the node's block pools lands in a request
// slot of the mapper's virtual tensors, and how a slot's computed prompt rows
// land in the blocks published for others (virtual reservations, 0x06). The
// two caches must hold the same layout; each side's block size is its own
// view's. Bytes are moved unchanged, so the rows stay bitwise what was
// computed. With `to_begin`, row begin + i lands at row to_begin + i of
// `to_blocks` (a prompt module, computed alone, copied to where the
// assembled prompt stores it, 0x0CB). Errors: incompatible ("layout") for
// caches of other layouts, coordinate_out_of_range ("blocks") for a row past
// either table.
Status copy_kv_rows(const ModelKvCache& from, const SequenceBlocks& from_blocks, ModelKvCache& to,
                    const SequenceBlocks& to_blocks, uint32_t begin, uint32_t end,
                    std::optional<uint32_t> to_begin = std::nullopt);

// Writes one token row of group index g given in canonical order (B_row,g
// bytes, the order read_canonical_row answers) into `to` at (slot, row):
// how a process that produces canonical rows (`kvrt worker`'s synthetic
// K/V) stores them in a cache it reads through per-layer views. Errors:
// unknown_group, invalid_argument ("in": not B_row,g bytes),
// coordinate_out_of_range ("slot", "row").
Status write_canonical_row(ModelKvCache& to, uint32_t group_index, uint32_t slot, uint32_t row,
                           std::span<const uint8_t> in);

// Process-private pools, one per cache group, with the group's declared axis
// order and dtypes (so a row's bytes equal the shared pool's bytes).
class LocalModelKvCache final : public ModelKvCache {
 public:
  // Errors: invalid_argument for zero slots; the layout's own validation errors.
  static Result<std::unique_ptr<LocalModelKvCache>> create(const CacheLayoutManifest& layout, uint32_t slots);

  const CacheLayoutManifest& layout() const override { return layout_; }
  uint32_t slot_count() const override { return slots_; }
  const executor::PagedKvView& layer_view(uint32_t model_layer) const override;
  std::byte* writable_k(uint32_t model_layer) override;
  std::byte* writable_v(uint32_t model_layer) override;
  Status read_canonical_row(uint32_t group_index, uint32_t slot, uint32_t row, std::span<uint8_t> out) const override;

  // Views point into the pools this object owns: neither copied nor moved.
  LocalModelKvCache(const LocalModelKvCache&) = delete;
  LocalModelKvCache& operator=(const LocalModelKvCache&) = delete;

 private:
  // One group's K and V tensors, laid out by tensor_geometry() over
  // (layout, P_a, slots): the geometry a shm pool of the same group uses
  // (shm/pool_geometry.hpp), so element offsets, and hence canonical rows,
  // agree byte for byte.
  // calloc'd: a large request is fresh anonymous memory whose pages are
  // zeroed on first touch, so a cache as large as the node's pools (a
  // staged worker's host copy) costs the rows it holds, not its capacity.
  using ZeroedBytes = std::unique_ptr<std::byte, void (*)(void*)>;
  struct GroupPool {
    ZeroedBytes k{nullptr, std::free}, v{nullptr, std::free};  // [bytes] elements * scalar bytes, zeroed
  };
  LocalModelKvCache(CacheLayoutManifest layout, uint32_t slots) : layout_(std::move(layout)), slots_(slots) {}

  CacheLayoutManifest layout_;
  uint32_t slots_ = 0;                        // per group pool [blocks]
  std::vector<GroupPool> pools_;              // [group index]
  std::vector<executor::PagedKvView> views_;  // [model layer]
};

}  // namespace kvrt::model
