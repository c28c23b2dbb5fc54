#include "engine/worker_slots.hpp"

#include <unistd.h>

#include <iterator>

namespace kvrt {

Result<std::unique_ptr<WorkerSlots>> WorkerSlots::attach(const NodeDescriptor& node, const CacheLayoutManifest& layout,
                                                         EngineSession& session) {
  Result<MapperPoolView> view = VirtualModelKvCache::attach_view(node, layout);
  if (!view.ok()) return view.error();
  // The mapper keys bindings by request id across every session of the
  // node: this process's ids carry its pid and the top bit, which the engine
  // loops' ranges ((worker index + 1) << 40) never set.
  std::unique_ptr<WorkerSlots> slots(
      new WorkerSlots(session, std::move(view).value(), (uint64_t{1} << 63) | (uint64_t(::getpid()) << 32)));
  KVRT_TRY_ASSIGN(slots->cache_, VirtualModelKvCache::create(layout, slots->view_));
  return slots;
}

Result<std::vector<MapperOutcome>> WorkerSlots::send(std::vector<MapperOp> ops, const TraceContext& trace) {
  std::vector<MapperOp> all = std::move(queued_);
  queued_.clear();
  const size_t queued = all.size();
  all.insert(all.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
  if (all.empty()) return std::vector<MapperOutcome>{};
  MapperBatchReceipt receipt;
  KVRT_TRY_ASSIGN(receipt, session_.mapper(MapperBatch{trace, std::move(all)}));
  for (size_t i = 0; i < queued; ++i)
    if (const auto* e = std::get_if<Error>(&receipt.outcomes[i])) return *e;
  return std::vector<MapperOutcome>(std::make_move_iterator(receipt.outcomes.begin() + queued),
                                    std::make_move_iterator(receipt.outcomes.end()));
}

Result<WorkerSlots::Stepped> WorkerSlots::take_step(const MapperOutcome& outcome) {
  if (const auto* e = std::get_if<Error>(&outcome)) {
    if (e->code != ErrorCode::os_mapping_failed) return *e;
    ++counts_.steps_undone;
    return Stepped::undone;
  }
  const auto* s = std::get_if<StepResult>(&outcome);
  if (s == nullptr) return make_error(ErrorCode::invariant_violated, "a step answered without a result", "step");
  ++counts_.steps;
  if (s->feasibility != MappingFeasibility::ready) {
    ++counts_.steps_short;
    return Stepped::short_of_handles;
  }
  for (const MappedFrontierReceipt& f : s->receipts) counts_.pages_mapped += f.new_mappings.size();
  KVRT_TRY(view_.apply(*s));
  return Stepped::mapped;
}

Status WorkerSlots::flush(const TraceContext& trace) {
  KVRT_TRY(send({}, trace));
  return Status::success();
}

void WorkerSlots::append(const Slot& slot, uint32_t valid_rows) {
  queued_.emplace_back(std::in_place_type<MapperAppendOp>, slot.request, slot.generation, valid_rows);
}

void WorkerSlots::free(const Slot& slot) {
  queued_.emplace_back(std::in_place_type<MapperFreeOp>, slot.request, slot.generation, ReleaseMode::retain);
}

Result<std::vector<std::optional<WorkerSlots::Slot>>> WorkerSlots::bind(std::span<const uint32_t> reserve,
                                                                        std::span<const uint32_t> rows,
                                                                        const TraceContext& trace) {
  if (reserve.size() != rows.size())
    return make_error(ErrorCode::invalid_argument, "one row count per reservation", "rows");
  // The bindings, then a step per binding (ops apply in order, so each step
  // finds its slot bound; the step of a binding that was refused answers
  // unknown_request, and is not read).
  const size_t n = reserve.size();
  std::vector<MapperOp> ops;
  std::vector<RequestId> ids;
  for (uint32_t tokens : reserve) {
    ids.push_back(RequestId{next_request_++});
    ops.emplace_back(std::in_place_type<MapperAllocOp>, ids.back(), RequestGeneration{1}, tokens);
  }
  for (size_t i = 0; i < n; ++i)
    ops.emplace_back(std::in_place_type<MapperStepOp>, std::vector<StepRequest>{StepRequest{ids[i], rows[i]}},
                     MappingPath::synchronous);
  std::vector<MapperOutcome> outcomes;
  KVRT_TRY_ASSIGN(outcomes, send(std::move(ops), trace));
  std::vector<std::optional<Slot>> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (const auto* e = std::get_if<Error>(&outcomes[i])) {
      if (e->code != ErrorCode::slots_exhausted) return *e;
      ++counts_.slots_exhausted;  // other workers hold every slot now
      continue;
    }
    const auto* b = std::get_if<SlotBinding>(&outcomes[i]);
    if (b == nullptr) return make_error(ErrorCode::invariant_violated, "alloc answered without a slot", "slot");
    // Pages the slot kept from its previous owner, whose steps this view
    // may never have seen (0x06E).
    KVRT_TRY(view_.bind(*b));
    if (b->retained_mapping_reused) ++counts_.retained_slot_reuses;
    const Slot slot{ids[i], b->generation, b->slot.value};
    Stepped stepped;
    KVRT_TRY_ASSIGN(stepped, take_step(outcomes[n + i]));
    if (stepped == Stepped::mapped)
      out[i] = slot;
    else
      free(slot);  // nothing mapped for it: the slot goes back, its request waits
  }
  return out;
}

Result<std::vector<WorkerSlots::Stepped>> WorkerSlots::step(std::span<const Slot> slots, std::span<const uint32_t> rows,
                                                            const TraceContext& trace) {
  if (slots.size() != rows.size()) return make_error(ErrorCode::invalid_argument, "one row count per slot", "rows");
  std::vector<MapperOp> ops;
  for (size_t i = 0; i < slots.size(); ++i)
    ops.emplace_back(std::in_place_type<MapperStepOp>, std::vector<StepRequest>{StepRequest{slots[i].request, rows[i]}},
                     MappingPath::synchronous);
  std::vector<MapperOutcome> outcomes;
  KVRT_TRY_ASSIGN(outcomes, send(std::move(ops), trace));
  std::vector<Stepped> stepped(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) KVRT_TRY_ASSIGN(stepped[i], take_step(outcomes[i]));
  return stepped;
}

Result<std::pair<uint32_t, uint32_t>> WorkerSlots::locate(const Slot& slot, uint32_t t) const {
  const uint32_t P = cache_->layout().allocator_block_size;
  if (t / P >= cache_->blocks_per_slot())
    return make_error(ErrorCode::coordinate_out_of_range,
                      "row " + std::to_string(t) + " lies past the slot's " +
                          std::to_string(uint64_t{cache_->blocks_per_slot()} * P) + " rows",
                      "row");
  return std::make_pair(slot.slot * cache_->blocks_per_slot() + t / P, t % P);
}

Status WorkerSlots::write_row(const Slot& slot, uint32_t t, std::span<const uint8_t> row) {
  std::pair<uint32_t, uint32_t> at;
  KVRT_TRY_ASSIGN(at, locate(slot, t));
  return model::write_canonical_row(*cache_, 0, at.first, at.second, row);
}

Status WorkerSlots::read_row(const Slot& slot, uint32_t t, std::span<uint8_t> row) const {
  std::pair<uint32_t, uint32_t> at;
  KVRT_TRY_ASSIGN(at, locate(slot, t));
  return cache_->read_canonical_row(0, at.first, at.second, row);
}

}  // namespace kvrt
