#include "services/mapper/mapper_service.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace kvrt {

Result<std::unique_ptr<MapperService>> MapperService::create(const MapperConfig& config, PoolGeneration generation,
                                                             bool map_ahead) {
  auto faults = std::make_unique<FaultPoints>();
  auto memfd = std::make_unique<MemfdBacking>();
  MemfdBacking* raw = memfd.get();
  // The fault points stay outermost: they model the OS refusing the owner's
  // own calls, and only the owner thread may reach them.
  std::unique_ptr<PageBacking> os = std::move(memfd);
  PrefetchingBacking* ahead = nullptr;
  if (map_ahead) {
    auto prefetching = std::make_unique<PrefetchingBacking>(std::move(os));
    ahead = prefetching.get();
    os = std::move(prefetching);
  }
  auto backing = std::make_unique<FaultPointBacking>(std::move(os), *faults);
  FaultPointBacking* calls = backing.get();
  auto mapper = VmmMapper::init(config, std::move(backing));
  if (!mapper.ok()) return mapper.error();
  return std::unique_ptr<MapperService>(
      new MapperService(std::move(faults), std::move(mapper).value(), raw, calls, ahead, generation));
}

MapperBatchReceipt MapperService::apply(SessionId session, const MapperBatch& batch) {
  MapperBatchReceipt out;
  out.trace = batch.trace;
  out.outcomes.reserve(batch.ops.size());
  for (const MapperOp& op : batch.ops) out.outcomes.push_back(apply_one(session, op));
  // One plan for the whole batch, after its last step: a plan replaces the
  // previous one, so planning after every step op would only redo it.
  if (!planned_steps_.empty()) plan_next_step();
  return out;
}

MapperOutcome MapperService::apply_one(SessionId session, const MapperOp& op) {
  ++operations_;
  MapperOutcome outcome = std::visit([&](const auto& o) { return apply(session, o); }, op);
  if (std::holds_alternative<Error>(outcome)) ++errors_;
  if (const auto* r = std::get_if<StepResult>(&outcome); r && r->feasibility != MappingFeasibility::ready)
    ++insufficient_;
  return outcome;
}

MapperOutcome MapperService::apply(SessionId s, const MapperAllocOp& op) {
  // A request another session holds is refused here, before the core could
  // answer "already bound" and so disclose that it exists.
  if (Status own = requests_.check(s, op.request.value, "request"); !own.ok()) return own.error();
  auto bound = mapper_->alloc_reqid(op.request, op.generation, op.expected_tokens);
  if (!bound.ok()) return bound.error();
  requests_.record(s, op.request.value);
  slot_generation_[op.request.value] = bound->generation;
  return *bound;
}

MapperOutcome MapperService::apply(SessionId s, const MapperStepOp& op) {
  // Every frontier of the step must be the session's own: one session never
  // makes the mapper touch another's slot (0x06I).
  for (size_t i = 0; i < op.requests.size(); ++i) {
    const std::string field = "requests[" + std::to_string(i) + "]";
    if (Status own = requests_.check(s, op.requests[i].request.value, field.c_str()); !own.ok()) return own.error();
  }
  auto stepped = mapper_->step(op.requests, op.path);
  if (!stepped.ok()) return stepped.error();
  if (ahead_ != nullptr && stepped->feasibility == MappingFeasibility::ready)
    planned_steps_.insert(planned_steps_.end(), op.requests.begin(), op.requests.end());
  return *stepped;
}

void MapperService::plan_next_step() {
  // 0x06D: decode adds at most one row per request and step. The next step
  // maps a page only for an active slot whose frontier one row further
  // crosses into a page it lacks; those slots, in the order of the batch's
  // steps and then by slot, are the plan (step() gives the lowest free
  // bundles to its requests in op order, and the plan mirrors that). The
  // plan is rebuilt after every batch with a ready step, so the newest one
  // covers every active slot. Whatever the next step does differently it
  // maps synchronously. One pass over the slots, one over the steps.
  const MapperGeometry& geo = mapper_->geometry();
  const uint32_t slots = geo.config().request_slots;
  std::vector<bool> taken(slots, false);
  std::unordered_map<uint64_t, uint32_t> slot_of;  // active request -> its slot
  for (uint32_t s = 0; s < slots; ++s)
    if (mapper_->slot(s).active) slot_of.emplace(mapper_->slot(s).request.value, s);
  std::vector<StepRequest> next;
  const auto consider = [&](uint32_t s) {
    const SlotRecord& slot = mapper_->slot(s);
    if (taken[s] || !slot.active || slot.target_tokens >= geo.config().max_tokens) return;
    taken[s] = true;
    if (geo.pages_for_tokens(slot.target_tokens + 1) > slot.pages.size())
      next.push_back(StepRequest{slot.request, slot.target_tokens + 1});
  };
  for (const StepRequest& r : planned_steps_)
    if (const auto it = slot_of.find(r.request.value); it != slot_of.end()) consider(it->second);
  planned_steps_.clear();
  for (uint32_t s = 0; s < slots; ++s) consider(s);
  // A refused plan only means the next step maps synchronously.
  if (!ahead_->prefetch(mapper_->plan_frontier_mappings(next)).ok()) ++plans_refused_;
}

MapperOutcome MapperService::apply(SessionId s, const MapperAppendOp& op) {
  if (Status own = requests_.check(s, op.request.value, "request"); !own.ok()) return own.error();
  if (Status st = mapper_->append_rows(op.request, op.generation, op.valid_tokens); !st.ok()) return st.error();
  return MapperDone{};
}

MapperOutcome MapperService::apply(SessionId s, const MapperFreeOp& op) {
  if (Status own = requests_.check(s, op.request.value, "request"); !own.ok()) return own.error();
  if (Status st = mapper_->free_reqid(op.request, op.generation, op.mode); !st.ok()) {
    // unmap_now the OS refused part-way: the slot was freed first and the
    // pages left mapped stay as retained capacity (0x06E), so the request is
    // no longer bound and no longer this session's.
    if (!mapper_->published_frontier(op.request).ok()) {
      requests_.forget(op.request.value);
      slot_generation_.erase(op.request.value);
    }
    return st.error();
  }
  requests_.forget(op.request.value);
  slot_generation_.erase(op.request.value);
  return MapperDone{};
}

Result<uint32_t> MapperService::published_frontier(SessionId session, RequestId request) const {
  if (Status own = requests_.check(session, request.value, "slot_request"); !own.ok()) return own.error();
  return mapper_->published_frontier(request);
}

uint32_t MapperService::end_session(SessionId session) {
  uint32_t freed = 0;
  for (uint64_t request : requests_.held_by(session)) {
    const auto generation = slot_generation_.find(request);
    if (generation != slot_generation_.end() &&
        mapper_->free_reqid(RequestId{request}, generation->second, ReleaseMode::retain).ok())
      ++freed;
    requests_.forget(request);
    slot_generation_.erase(request);
  }
  if (freed > 0) ++sessions_reclaimed_;
  return freed;
}

PagePoolOffer MapperService::page_offer() const {
  const MapperGeometry& geo = mapper_->geometry();
  PagePoolOffer offer;
  offer.identity = PagePoolIdentity{geo.config().page_group_bytes, geo.config().handle_count, generation_};
  offer.view_pages = static_cast<uint32_t>(geo.virtual_reserved_bytes() / geo.config().page_group_bytes);
  for (uint32_t s = 0; s < geo.config().request_slots; ++s) {
    const SlotRecord& slot = mapper_->slot(s);
    for (uint32_t q = 0; q < slot.pages.size(); ++q)
      for (uint32_t t = 0; t < slot.pages[q].size(); ++t)
        offer.pages.push_back(ViewPage{static_cast<uint32_t>(geo.page_offset(t, s, q) / geo.config().page_group_bytes),
                                       slot.pages[q][t].value});
  }
  return offer;
}

OwnerStats MapperService::stats() const {
  OwnerStats out;
  out.owner = "mapper";
  auto put = [&](std::string name, uint64_t value) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(value)});
  };
  const MappingLedger l = mapper_->ledger();
  uint64_t active = 0;
  for (uint32_t s = 0; s < mapper_->geometry().config().request_slots; ++s) active += mapper_->slot(s).active ? 1 : 0;
  put("active_slots", active);
  // L_map of 0x0CF over the active slots: the frontier a step asked for
  // beyond the pages mapped for it (0x06D: positive blocks execution).
  uint64_t lag = 0;
  const uint64_t page_tokens = mapper_->geometry().tokens_per_page();
  for (uint32_t s = 0; s < mapper_->geometry().config().request_slots; ++s) {
    const SlotRecord& slot = mapper_->slot(s);
    if (!slot.active) continue;
    const uint64_t ready = slot.pages.size() * page_tokens;
    if (slot.target_tokens > ready) lag = std::max<uint64_t>(lag, slot.target_tokens - ready);
  }
  put("mapping_lag_tokens", lag);
  put("bound_requests", requests_.size());
  put("virtual_reserved_bytes", l.virtual_reserved_bytes);
  put("physical_pool_bytes", l.physical_pool_bytes);
  put("mapped_bytes", l.mapped_bytes);
  put("active_valid_bytes", l.active_valid_bytes);
  put("active_slack_bytes", l.active_slack_bytes);
  put("inactive_retained_bytes", l.inactive_retained_bytes);
  put("free_handle_bytes", l.free_handle_bytes);
  put("bundle_maps", mapper_->bundle_maps());
  put("bundle_unmaps", mapper_->bundle_unmaps());
  put("os_calls_refused", calls_->refused());  // by an armed fault point
  put("operations", operations_);
  put("errors", errors_);
  put("insufficient_handles", insufficient_);
  put("sessions_reclaimed", sessions_reclaimed_);
  // 0x06D one step ahead (0 everywhere without [mapper] map_ahead): the
  // owner's map calls a prefetched page satisfied, those it made itself,
  // and the time it waited for a background batch.
  put("map_ahead", ahead_ != nullptr ? 1 : 0);
  if (ahead_ != nullptr) {
    const PrefetchStats p = ahead_->stats();
    put("map_ahead_planned", p.planned);
    put("map_ahead_hits", p.hits);
    put("map_ahead_foreground_maps", p.foreground_maps);
    put("map_ahead_background_maps", p.background_maps);
    put("map_ahead_background_failures", p.background_failures);
    put("map_ahead_await_us", p.await_ns / 1000);
    put("map_ahead_plans_refused", plans_refused_);
  }
  return out;
}

}  // namespace kvrt
