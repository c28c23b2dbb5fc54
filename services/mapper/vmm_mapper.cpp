#include "services/mapper/vmm_mapper.hpp"

#include <algorithm>
#include <string>

namespace kvrt {

VmmMapper::VmmMapper(MapperGeometry geometry, std::unique_ptr<PageBacking> backing)
    : geometry_(std::move(geometry)), backing_(std::move(backing)) {}

VmmMapper::~VmmMapper() {
  if (backing_) backing_->release();
}

Result<std::unique_ptr<VmmMapper>> VmmMapper::init(const MapperConfig& config, std::unique_ptr<PageBacking> backing) {
  if (!backing) return make_error(ErrorCode::invalid_argument, "no page backing", "backing");
  MapperGeometry geometry;
  KVRT_TRY_ASSIGN(geometry, MapperGeometry::make(config));
  std::unique_ptr<VmmMapper> mapper(new VmmMapper(geometry, std::move(backing)));
  KVRT_TRY(mapper->backing_->create(geometry.virtual_reserved_bytes(), geometry.physical_pool_bytes(),
                                    config.page_group_bytes));
  mapper->phase_ = MapperPhase::va_reserved;
  mapper->slots_.resize(config.request_slots);
  mapper->reused_retained_.assign(config.request_slots, false);
  mapper->handles_.resize(config.handle_count);
  for (uint64_t h = 0; h < config.handle_count; ++h) mapper->free_handles_.insert(h);
  // The one from-scratch digest; every later transition updates it in place.
  mapper->digest_ = MultisetDigest{};
  mapper->digest_.add_digest(mapper->recompute_digest());
  return mapper;
}

Status VmmMapper::require_reserved() const {
  if (phase_ != MapperPhase::va_reserved)
    return make_error(ErrorCode::mapper_shut_down, "the mapper's virtual ranges are released", "phase");
  return Status::success();
}

Result<uint32_t> VmmMapper::published_frontier(RequestId request) const {
  for (const SlotRecord& slot : slots_) {
    if (!slot.active || slot.request != request) continue;
    const uint64_t mapped_tokens = uint64_t{slot.pages.size()} * geometry_.tokens_per_page();
    return static_cast<uint32_t>(std::min<uint64_t>(mapped_tokens, slot.target_tokens));
  }
  return make_error(ErrorCode::unknown_request, "request " + std::to_string(request.value) + " is not bound",
                    "request_id");
}

Result<uint32_t> VmmMapper::find_active(RequestId request, SlotGeneration generation) const {
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    const SlotRecord& slot = slots_[s];
    if (!slot.active || slot.request != request) continue;
    if (slot.generation != generation)
      return make_error(ErrorCode::stale_slot_generation,
                        "request " + std::to_string(request.value) + " holds slot " + std::to_string(s) +
                            " at generation " + std::to_string(slot.generation.value) + ", not " +
                            std::to_string(generation.value),
                        "slot_generation");
    return s;
  }
  return make_error(ErrorCode::unknown_request, "request " + std::to_string(request.value) + " is not bound",
                    "request_id");
}

uint64_t VmmMapper::retained_bundle_count() const {
  uint64_t n = 0;
  for (const SlotRecord& s : slots_)
    if (!s.active) n += s.pages.size();
  return n;
}

Result<SlotBinding> VmmMapper::alloc_reqid(RequestId request, RequestGeneration generation, uint32_t expected_tokens) {
  KVRT_TRY(require_reserved());
  for (const SlotRecord& s : slots_)
    if (s.active && s.request == request)
      return make_error(ErrorCode::invalid_argument, "request " + std::to_string(request.value) + " already bound",
                        "request_id");
  if (expected_tokens > geometry_.config().max_tokens)
    return make_error(ErrorCode::coordinate_out_of_range, "expected tokens exceed T_max", "expected_tokens");
  // The prototype's alloc_new_batch_idx(seqlen) prefers an inactive slot whose
  // retained mapping already covers the request (0x06B): the fitting slot with
  // the fewest retained pages, then an empty slot, then the largest retention.
  const uint32_t needed = geometry_.pages_for_tokens(expected_tokens);
  int fitting = -1, empty = -1, largest = -1;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    const SlotRecord& slot = slots_[s];
    if (slot.active) continue;
    const size_t pages = slot.pages.size();
    if (pages >= needed && (fitting < 0 || pages < slots_[fitting].pages.size())) fitting = static_cast<int>(s);
    if (pages == 0 && empty < 0) empty = static_cast<int>(s);
    if (largest < 0 || pages > slots_[largest].pages.size()) largest = static_cast<int>(s);
  }
  const int chosen = fitting >= 0 ? fitting : (empty >= 0 ? empty : largest);
  if (chosen < 0) return make_error(ErrorCode::slots_exhausted, "every request slot is active", "request_slots");
  SlotRecord& slot = slots_[chosen];
  forget_slot(static_cast<uint32_t>(chosen));
  slot.active = true;
  slot.request = request;
  slot.request_generation = generation;
  slot.generation = SlotGeneration{slot.generation.value + 1};
  // 0x06E: the mapping survives the handoff, the old K/V validity does not.
  slot.valid_tokens = 0;
  slot.target_tokens = 0;
  record_slot(static_cast<uint32_t>(chosen));
  reused_retained_[chosen] = !slot.pages.empty();
  epoch_ = Epoch{epoch_.value + 1};
  // The new owner's process may never have seen these pages (another
  // worker's request mapped them): it needs them to map its own view.
  std::vector<PageMapping> retained;
  for (uint32_t q = 0; q < slot.pages.size(); ++q)
    for (uint32_t t = 0; t < slot.pages[q].size(); ++t) {
      const PageHandleId h = slot.pages[q][t];
      retained.push_back(PageMapping{t / 2, static_cast<KvTensorKind>(t % 2), q, h, handles_[h.value].generation});
    }
  return SlotBinding{RequestSlot{static_cast<uint32_t>(chosen)}, slot.generation,
                     static_cast<uint32_t>(slot.pages.size()), !slot.pages.empty(), std::move(retained)};
}

std::vector<PageHandleId> VmmMapper::take_free_bundle() {
  std::vector<PageHandleId> bundle;
  for (uint32_t t = 0; t < geometry_.tensor_count(); ++t) {
    bundle.push_back(PageHandleId{*free_handles_.begin()});
    free_handles_.erase(free_handles_.begin());
  }
  return bundle;
}

Status VmmMapper::map_bundle(uint32_t s, std::vector<PageHandleId> bundle, std::vector<PageMapping>* out) {
  SlotRecord& slot = slots_[s];
  const uint32_t page = static_cast<uint32_t>(slot.pages.size());  // the contiguous frontier
  const uint64_t g = geometry_.config().page_group_bytes;
  for (uint32_t t = 0; t < bundle.size(); ++t) {
    Status mapped = backing_->map(geometry_.page_offset(t, s, page), bundle[t].value * g, g);
    if (!mapped.ok()) {
      // Undo this bundle's earlier tensors so no frontier is left half mapped (0x06D).
      for (uint32_t u = 0; u < t; ++u) (void)backing_->unmap(geometry_.page_offset(u, s, page), g);
      for (PageHandleId h : bundle) free_handles_.insert(h.value);
      return mapped.error();
    }
  }
  forget_header();
  for (uint32_t t = 0; t < bundle.size(); ++t) {
    const BlockGeneration next{handles_[bundle[t].value].generation.value + 1};
    set_handle(bundle[t].value, HandleRecord{HandleState::mapped, RequestSlot{s}, t, page, next});
    if (out != nullptr) out->push_back(PageMapping{t / 2, static_cast<KvTensorKind>(t % 2), page, bundle[t], next});
  }
  slot.pages.push_back(std::move(bundle));
  ++bundle_maps_;
  record_header();
  return Status::success();
}

Status VmmMapper::unmap_highest_bundle(uint32_t s) {
  SlotRecord& slot = slots_[s];
  const uint32_t page = static_cast<uint32_t>(slot.pages.size() - 1);
  const uint64_t g = geometry_.config().page_group_bytes;
  for (uint32_t t = 0; t < geometry_.tensor_count(); ++t) {
    Status unmapped = backing_->unmap(geometry_.page_offset(t, s, page), g);
    if (!unmapped.ok()) {
      // Map this bundle's earlier tensors back: the core still counts the
      // whole bundle as mapped, so the OS must show it whole (0x06D).
      for (uint32_t u = 0; u < t; ++u)
        (void)backing_->map(geometry_.page_offset(u, s, page), slot.pages.back()[u].value * g, g);
      return unmapped.error();
    }
  }
  forget_header();
  for (PageHandleId id : slot.pages.back()) {
    set_handle(id.value, HandleRecord{HandleState::created_free, {}, 0, 0, handles_[id.value].generation});
    free_handles_.insert(id.value);
  }
  slot.pages.pop_back();
  ++bundle_unmaps_;
  record_header();
  return Status::success();
}

Result<StepResult> VmmMapper::step(const std::vector<StepRequest>& requests, MappingPath path) {
  KVRT_TRY(require_reserved());
  // Check every request before touching anything: a rejected step changes nothing.
  // Runs every decode step: one flag per slot instead of a hash set (a bound
  // request has exactly one slot, so a repeated slot is a repeated request;
  // the loop stops at the first error, so an unbound request is reported as
  // unknown before any repeat of it could be seen).
  std::vector<uint32_t> slot_of;
  slot_of.reserve(requests.size());
  std::vector<uint8_t> in_step(slots_.size(), 0);
  uint64_t needed = 0;
  for (const StepRequest& r : requests) {
    int found = -1;
    for (uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].active && slots_[s].request == r.request) found = static_cast<int>(s);
    if (found < 0)
      return make_error(ErrorCode::unknown_request, "request " + std::to_string(r.request.value) + " is not bound",
                        "request_id");
    if (in_step[found]++ != 0)
      return make_error(ErrorCode::duplicate_axis, "request " + std::to_string(r.request.value) + " twice in one step",
                        "sequence_lengths");
    const SlotRecord& slot = slots_[found];
    if (r.target_tokens > geometry_.config().max_tokens)
      return make_error(ErrorCode::coordinate_out_of_range,
                        "target " + std::to_string(r.target_tokens) + " exceeds T_max", "sequence_lengths");
    if (r.target_tokens < slot.valid_tokens)
      return make_error(ErrorCode::invalid_argument, "target below the rows already written", "sequence_lengths");
    const uint32_t pages = geometry_.pages_for_tokens(r.target_tokens);
    if (pages > slot.pages.size()) needed += pages - slot.pages.size();
    slot_of.push_back(static_cast<uint32_t>(found));
  }
  StepResult result;
  result.bundles_needed = static_cast<uint32_t>(needed);
  result.bundles_available = static_cast<uint32_t>(free_bundle_count() + retained_bundle_count());
  if (needed > result.bundles_available) {
    result.feasibility = MappingFeasibility::insufficient_handles;  // M5.2 decides whom to delay (0x06D)
    return result;
  }
  result.receipts.reserve(requests.size());
  std::vector<std::vector<PageMapping>> new_maps(requests.size());
  std::vector<std::vector<ReclaimedPageBundle>> reclaimed(requests.size());
  // Every change, so that an OS refusal part-way through undoes the whole
  // step, not only the bundle it refused.
  std::vector<StepChange>& changes = step_changes_;
  changes.clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    const uint32_t s = slot_of[i];
    changes.push_back(StepChange{StepChange::Kind::target, s, slots_[s].target_tokens, {}});
    forget_slot(s);
    slots_[s].target_tokens = requests[i].target_tokens;
    record_slot(s);
    while (slots_[s].pages.size() < geometry_.pages_for_tokens(requests[i].target_tokens)) {
      if (free_bundle_count() == 0) {
        // 0x06E: unmap an inactive slot's highest page bundle, return it to the
        // pool, then map it at this active frontier (lowest such slot first).
        uint32_t victim = 0;
        while (slots_[victim].active || slots_[victim].pages.empty()) ++victim;
        reclaimed[i].push_back(ReclaimedPageBundle{RequestSlot{victim}, slots_[victim].generation,
                                                   static_cast<uint32_t>(slots_[victim].pages.size() - 1),
                                                   static_cast<uint32_t>(slots_[s].pages.size())});
        std::vector<PageHandleId> bundle = slots_[victim].pages.back();
        if (Status unmapped = unmap_highest_bundle(victim); !unmapped.ok()) return undo_step(changes, unmapped.error());
        changes.push_back(StepChange{StepChange::Kind::reclaimed, victim, 0, std::move(bundle)});
      }
      if (Status mapped = map_bundle(s, take_free_bundle(), &new_maps[i]); !mapped.ok())
        return undo_step(changes, mapped.error());
      changes.push_back(StepChange{StepChange::Kind::mapped, s, 0, {}});
    }
  }
  epoch_ = Epoch{epoch_.value + 1};
  // Every receipt of one step is published after all of its mappings, so they
  // share one ledger (computed once: O(slots), not O(slots) per request).
  const MappingLedger after = ledger();
  for (size_t i = 0; i < requests.size(); ++i) {
    MappedFrontierReceipt receipt = make_receipt(slot_of[i], path, after);
    receipt.new_mappings = std::move(new_maps[i]);
    receipt.reclaimed_bundles = std::move(reclaimed[i]);
    result.receipts.push_back(std::move(receipt));
  }
  return result;
}

Error VmmMapper::undo_step(std::vector<StepChange>& changes, Error cause) {
  const uint64_t g = geometry_.config().page_group_bytes;
  uint32_t kept_reclaims = 0;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    const uint32_t s = it->slot;
    SlotRecord& slot = slots_[s];
    switch (it->kind) {
      case StepChange::Kind::target:
        forget_slot(s);
        slot.target_tokens = it->old_target;
        record_slot(s);
        break;
      case StepChange::Kind::mapped: {
        // The bundle this step mapped goes back to the free handles with the
        // generation it had: the next step takes exactly the handles, in the
        // order, that it would have taken had this one never run.
        // An unmap refused here (a second OS failure) leaves the page showing
        // beyond the restored frontier, where no receipt and no valid row
        // reaches it, until the next map of that address replaces it.
        const uint32_t page = static_cast<uint32_t>(slot.pages.size() - 1);
        for (uint32_t t = 0; t < geometry_.tensor_count(); ++t)
          (void)backing_->unmap(geometry_.page_offset(t, s, page), g);
        forget_header();
        for (PageHandleId id : slot.pages.back()) {
          const BlockGeneration before{handles_[id.value].generation.value - 1};
          set_handle(id.value, HandleRecord{HandleState::created_free, {}, 0, 0, before});
          free_handles_.insert(id.value);
        }
        slot.pages.pop_back();
        --bundle_maps_;
        record_header();
        break;
      }
      case StepChange::Kind::reclaimed: {
        // Map the victim's bundle back where it was (its handles are free
        // again: the mapped change that took them was undone first). If the
        // OS refuses that too, the reclaim stands: the victim's retained
        // capacity shrank, which is a valid state the core then reports.
        const uint32_t page = static_cast<uint32_t>(slot.pages.size());
        uint32_t t = 0;
        for (; t < it->bundle.size(); ++t)
          if (!backing_->map(geometry_.page_offset(t, s, page), it->bundle[t].value * g, g).ok()) break;
        if (t < it->bundle.size()) {
          for (uint32_t u = 0; u < t; ++u) (void)backing_->unmap(geometry_.page_offset(u, s, page), g);
          ++kept_reclaims;
          break;
        }
        forget_header();
        for (uint32_t k = 0; k < it->bundle.size(); ++k) {
          const uint64_t id = it->bundle[k].value;
          set_handle(id, HandleRecord{HandleState::mapped, RequestSlot{s}, k, page, handles_[id].generation});
          free_handles_.erase(id);
        }
        slot.pages.push_back(it->bundle);
        --bundle_unmaps_;
        record_header();
        break;
      }
    }
  }
  cause.reason = "step undone: " + cause.reason;
  if (kept_reclaims > 0) {
    cause.reason +=
        "; " + std::to_string(kept_reclaims) + " reclaimed retained bundle(s) could not be mapped back and stay free";
    epoch_ = Epoch{epoch_.value + 1};  // the state moved: a compensating successor, not the predecessor
  }
  return cause;
}

Status VmmMapper::append_rows(RequestId request, SlotGeneration generation, uint32_t valid_tokens) {
  KVRT_TRY(require_reserved());
  uint32_t s = 0;
  KVRT_TRY_ASSIGN(s, find_active(request, generation));
  SlotRecord& slot = slots_[s];
  if (valid_tokens < slot.valid_tokens)
    return make_error(ErrorCode::invalid_argument, "rows only grow within a slot generation", "valid_tokens");
  const uint64_t mapped_tokens = uint64_t{slot.pages.size()} * geometry_.tokens_per_page();
  if (valid_tokens > mapped_tokens || valid_tokens > slot.target_tokens)
    return make_error(ErrorCode::page_not_mapped,
                      "row " + std::to_string(valid_tokens - 1) + " lies beyond the published frontier (" +
                          std::to_string(std::min<uint64_t>(mapped_tokens, slot.target_tokens)) + " rows)",
                      "valid_tokens");
  forget_slot(s);
  slot.valid_tokens = valid_tokens;
  record_slot(s);
  epoch_ = Epoch{epoch_.value + 1};
  return Status::success();
}

Status VmmMapper::check_readable(RequestId request, SlotGeneration generation, uint32_t tokens) const {
  KVRT_TRY(require_reserved());
  uint32_t s = 0;
  KVRT_TRY_ASSIGN(s, find_active(request, generation));
  const SlotRecord& slot = slots_[s];
  if (tokens > uint64_t{slot.pages.size()} * geometry_.tokens_per_page())
    return make_error(ErrorCode::page_not_mapped, "read beyond the mapped frontier", "tokens");
  if (tokens > slot.valid_tokens)
    return make_error(ErrorCode::rows_not_valid,
                      "this slot generation wrote " + std::to_string(slot.valid_tokens) +
                          " rows; a retained "
                          "mapping is capacity, not K/V (0x06E)",
                      "tokens");
  return Status::success();
}

Status VmmMapper::free_reqid(RequestId request, SlotGeneration generation, ReleaseMode mode) {
  KVRT_TRY(require_reserved());
  uint32_t s = 0;
  KVRT_TRY_ASSIGN(s, find_active(request, generation));
  SlotRecord& slot = slots_[s];
  forget_slot(s);
  slot.active = false;
  slot.valid_tokens = 0;  // the prototype's free_batch_idx sets the length to zero
  slot.target_tokens = 0;
  record_slot(s);
  reused_retained_[s] = false;
  if (mode == ReleaseMode::unmap_now)
    while (!slot.pages.empty()) KVRT_TRY(unmap_highest_bundle(s));
  epoch_ = Epoch{epoch_.value + 1};
  return Status::success();
}

Status VmmMapper::shutdown() {
  KVRT_TRY(require_reserved());
  for (const SlotRecord& slot : slots_)
    if (slot.active)
      return make_error(ErrorCode::invalid_argument,
                        "request " + std::to_string(slot.request.value) + " is still active", "active_requests");
  for (uint32_t s = 0; s < slots_.size(); ++s)
    while (!slots_[s].pages.empty()) KVRT_TRY(unmap_highest_bundle(s));
  for (uint64_t h = 0; h < handles_.size(); ++h) {
    forget_handle(h);
    handles_[h].state = HandleState::released;
    record_handle(h);
  }
  free_handles_.clear();
  backing_->release();
  forget_header();
  phase_ = MapperPhase::va_released;
  record_header();
  epoch_ = Epoch{epoch_.value + 1};
  return Status::success();
}

Result<PhysicalLocation> VmmMapper::translate(RequestId request, SlotGeneration generation, uint32_t layer,
                                              KvTensorKind kind, uint32_t token, uint32_t head, uint32_t lane) const {
  KVRT_TRY(require_reserved());
  uint32_t s = 0;
  KVRT_TRY_ASSIGN(s, find_active(request, generation));
  PhysicalLocation loc;
  KVRT_TRY_ASSIGN(loc.address, geometry_.locate(layer, kind, s, token, head, lane));
  const SlotRecord& slot = slots_[s];
  if (loc.address.page_index >= slot.pages.size())
    return make_error(ErrorCode::page_not_mapped,
                      "page q=" + std::to_string(loc.address.page_index) + " of slot " + std::to_string(s) +
                          " is reserved but not mapped",
                      "token");
  loc.handle = slot.pages[loc.address.page_index][loc.address.tensor_index];
  loc.pool_offset = loc.handle.value * geometry_.config().page_group_bytes + loc.address.offset_in_page;
  return loc;
}

}  // namespace kvrt
