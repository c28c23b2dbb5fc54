#pragma once
// `kvrt worker` over virtual reservations (vAttention, spec 0x06): the
// request slots of the node's mapper owner, seen through this worker's own
// view of the node's page pool. Each request is bound to a slot
// (alloc_reqid), stepped to the rows it writes before it writes them (map
// before use, 0x06D: the receipt's pages are mapped into the view at once),
// its rows written there in the canonical order the block pools use, the
// rows it wrote reported (MapperAppendOp), and its slot freed with the pages
// retained for the next owner, possibly another worker (0x06E). The block
// pools stay the prompt tier: hits are read there and copied into the slot,
// computed prompt rows are copied back for publication (worker_runtime.cpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine_session.hpp"
#include "engine/virtual_model_kv_cache.hpp"
#include "services/mapper/mapper_view.hpp"

namespace kvrt {

class WorkerSlots {
 public:
  struct Slot {
    RequestId request;  // the mapper's key of this binding (not the allocator's request)
    SlotGeneration generation;
    uint32_t slot = 0;
  };
  struct Counts {
    uint64_t steps = 0;                 // step ops sent [ops]
    uint64_t steps_short = 0;           // of those, answered short of page handles (nothing mapped)
    uint64_t pages_mapped = 0;          // pages the node mapped for this worker's steps [pages]
    uint64_t retained_slot_reuses = 0;  // bindings that found pages kept by the slot's previous owner
    uint64_t slots_exhausted = 0;       // bindings refused: no inactive slot
    // Steps the OS refused part-way (os_mapping_failed: an armed mapper
    // fault point, or the kernel out of memory), which the node undid whole:
    // handled as steps short of handles.
    uint64_t steps_undone = 0;
  };
  // Errors: config_field ("mapper") when the node serves no [mapper]; the
  // view's attach errors; VirtualModelKvCache::create's for a layout the
  // mapper's slots cannot hold. The round trips go through `session` (its
  // call observer times them as Owner::mapper).
  static Result<std::unique_ptr<WorkerSlots>> attach(const NodeDescriptor& node, const CacheLayoutManifest& layout,
                                                     EngineSession& session);

  // Binds one slot per entry of `reserve` (prompt plus decode [tokens]) and
  // steps each bound slot to `rows[i]` rows. An entry answers nullopt when
  // no slot was free or its step came up short of page handles (its slot is
  // freed again); the caller serves that request later or drops it.
  // One round trip: the append and free ops queued so far, the bindings and
  // their steps travel in the same message.
  Result<std::vector<std::optional<Slot>>> bind(std::span<const uint32_t> reserve, std::span<const uint32_t> rows,
                                                const TraceContext& trace);
  // What one slot's step did.
  enum class Stepped : uint8_t {
    mapped,            // its pages are mapped in this view now
    short_of_handles,  // nothing mapped (a feasibility result, 0x06D)
    undone,            // the OS refused part-way and the node undid it all
  };
  // Steps each slot to its rows (one step op each, so one short of handles
  // does not hold back the others). Sends the queued ops first.
  Result<std::vector<Stepped>> step(std::span<const Slot> slots, std::span<const uint32_t> rows,
                                    const TraceContext& trace);
  // Queued for the next message: rows [0, valid) of the slot are written;
  // the slot is freed (its pages retained, 0x06E).
  void append(const Slot& slot, uint32_t valid_rows);
  void free(const Slot& slot);
  // Sends what is queued. Errors: the round trip's, and the first op error.
  Status flush(const TraceContext& trace);

  // One canonical token row (every layer's K, then V) of the slot, at row t.
  // Errors: coordinate_out_of_range past the slot's T_max.
  Status write_row(const Slot& slot, uint32_t t, std::span<const uint8_t> row);
  Status read_row(const Slot& slot, uint32_t t, std::span<uint8_t> row) const;
  uint64_t row_bytes() const { return cache_->layout().cache_groups[0].row_bytes(); }

  const Counts& counts() const { return counts_; }

  WorkerSlots(const WorkerSlots&) = delete;
  WorkerSlots& operator=(const WorkerSlots&) = delete;

 private:
  WorkerSlots(EngineSession& session, MapperPoolView view, uint64_t first_request)
      : session_(session), view_(std::move(view)), next_request_(first_request) {}
  // The queued appends and frees, then `ops`, in one message: the outcomes
  // of `ops` (a queued op's error is the call's).
  Result<std::vector<MapperOutcome>> send(std::vector<MapperOp> ops, const TraceContext& trace);
  // One step op's outcome: its pages into this view, and the counts.
  // Errors: any but os_mapping_failed (an undone step).
  Result<Stepped> take_step(const MapperOutcome& outcome);
  // The block and in-block row of slot row t in the cache's block view.
  Result<std::pair<uint32_t, uint32_t>> locate(const Slot& slot, uint32_t t) const;

  EngineSession& session_;
  MapperPoolView view_;  // the cache reads through it: neither moved nor copied after attach
  std::unique_ptr<VirtualModelKvCache> cache_;
  std::vector<MapperOp> queued_;
  uint64_t next_request_;
  Counts counts_;
};

}  // namespace kvrt
