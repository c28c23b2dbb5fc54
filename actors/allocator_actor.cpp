// The allocator owner's actor: decodes an AllocatorBatch, applies it to the
// AllocatorService in one call, encodes the AllocatorBatchReceipt. Bytes that
// do not decode answer an encoded typed Error, and the actor keeps serving
// (issue 5: nothing a client sends may crash the node). After every batch
// the cache identities the allocator dropped go to the prefix index.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codec_node.hpp"

namespace kvrt::actors {

namespace {

struct AllocatorActorState {
  static inline const char* name = "allocator";
  std::shared_ptr<AllocatorService> service;
  Observability obs;
  prefix_actor events_sink;
};

void forward_events(AllocatorActorState& st, allocator_actor::stateful_pointer<AllocatorActorState> self) {
  std::vector<AllocatorEvent> events = st.service->drain_events();
  if (!events.empty() && st.events_sink) self->send(st.events_sink, events_atom::value, std::move(events));
}

}  // namespace

allocator_actor spawn_allocator_actor(caf::actor_system& system, std::shared_ptr<AllocatorService> service,
                                      Observability obs) {
  auto behavior = [](allocator_actor::stateful_pointer<AllocatorActorState> self,
                     std::shared_ptr<AllocatorService> svc, Observability o) -> allocator_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.obs = std::move(o);
    return {
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> wire_bytes {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "allocator", "allocator.batch", {});
          Result<AllocatorBatch> batch = codec::decode<AllocatorBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "allocator", session, batch.error());
            return to_wire(codec::encode(codec::ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          if (st.obs.trace) st.obs.trace->flow_finish("allocator", ChromeTraceRecorder::now_us(), flow_id(batch->trace));
          AllocatorBatchReceipt receipt = st.service->apply(SessionId{session}, *batch);
          forward_events(st, self);
          return to_wire(codec::encode(receipt));
        },
        [self](table_atom, uint64_t session, uint64_t request) -> BlockTableView {
          auto& st = self->state;
          AllocatorOutcome out = st.service->apply_one(SessionId{session}, ReadTableOp{RequestId{request}});
          if (auto* view = std::get_if<BlockTableView>(&out)) return std::move(*view);
          // An empty view (no groups) says "no such table" to the index,
          // which answers the worker with its own typed error.
          return BlockTableView{};
        },
        [self](tags_atom, const std::vector<CacheKeyTag>& tags) -> std::vector<uint8_t> {
          std::vector<Status> results = self->state.service->tag_cache_keys(tags);
          std::vector<uint8_t> accepted(results.size());
          for (size_t i = 0; i < results.size(); ++i) accepted[i] = results[i].ok() ? 1 : 0;
          return accepted;
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
        [self](end_atom, uint64_t session) {
          auto& st = self->state;
          SessionReclaim r = st.service->end_session(SessionId{session});
          forward_events(st, self);
          log_reclaim(st.obs.log, "allocator", session, r.requests_released, r.leases_released);
        },
        [self](events_atom, prefix_actor sink) { self->state.events_sink = std::move(sink); },
        // The radix index's cached pages: one lease per block, held by the
        // node itself (session 0); 0 answers a refused lease.
        [self](lease_atom, const std::vector<PhysicalBlockHandle>& handles) -> std::vector<uint64_t> {
          std::vector<uint64_t> leases;
          leases.reserve(handles.size());
          for (const PhysicalBlockHandle& h : handles) {
            AllocatorOutcome out = self->state.service->apply_one(kNodeSession, AcquireLeaseOp{h});
            const auto* r = std::get_if<LeaseReceipt>(&out);
            leases.push_back(r != nullptr ? r->lease.value : 0);
          }
          return leases;
        },
        [self](unlease_atom, const std::vector<uint64_t>& leases) {
          auto& st = self->state;
          for (uint64_t l : leases) (void)st.service->apply_one(kNodeSession, ReleaseLeaseOp{LeaseId{l}});
          forward_events(st, self);
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(obs));
}

}  // namespace kvrt::actors
