// The allocator owner's actor: decodes an AllocatorBatch, applies it to the
// AllocatorService in one call, encodes the AllocatorBatchReceipt. Bytes that
// do not decode answer an encoded typed Error, and the actor keeps serving
// (issue 5: nothing a client sends may crash the node). After every batch
// the cache identities the allocator dropped go to the prefix index.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

namespace {

struct AllocatorActorState {
  static inline const char* name = "allocator";
  std::shared_ptr<AllocatorService> service;
  Observability obs;
  prefix_actor events_sink;
  // Refusals for capacity since the last release (see report_pressure).
  uint32_t refusals_since_release = 0;
  uint32_t missing_blocks = 0;
};

// Requests that wait for one another's releases make progress on their own;
// only refusals piling up with no release in between mean the pools are held
// by something that will not let go by itself: the radix index's cache.
constexpr uint32_t kStuckRefusals = 32;

void forward_events(AllocatorActorState& st, allocator_actor::stateful_pointer<AllocatorActorState> self) {
  std::vector<AllocatorEvent> events = st.service->drain_events();
  if (!events.empty() && st.events_sink) self->send(st.events_sink, events_atom::value, std::move(events));
}

// Counts refusals for capacity (and the blocks per group they lacked: a
// prompt's blocks, or one for an append) until a release shows progress;
// after kStuckRefusals of them the index hears about the shortage once.
void report_pressure(AllocatorActorState& st, allocator_actor::stateful_pointer<AllocatorActorState> self,
                     const AllocatorBatch& batch, const AllocatorBatchReceipt& receipt) {
  const uint32_t P = st.service->core().block_size();
  for (size_t i = 0; i < receipt.outcomes.size() && i < batch.ops.size(); ++i) {
    if (std::holds_alternative<ReleaseResult>(receipt.outcomes[i])) {
      st.refusals_since_release = 0;
      st.missing_blocks = 0;
      continue;
    }
    const auto* r = std::get_if<AllocationReceipt>(&receipt.outcomes[i]);
    if (r == nullptr || r->outcome != AllocationOutcome::out_of_capacity) continue;
    ++st.refusals_since_release;
    const auto* a = std::get_if<AllocateOp>(&batch.ops[i]);
    st.missing_blocks = std::max(st.missing_blocks, a != nullptr ? (a->prompt_rows + P - 1) / P : 1u);
  }
  if (st.refusals_since_release >= kStuckRefusals && st.events_sink) {
    self->send(st.events_sink, pressure_atom::value, st.missing_blocks);
    st.refusals_since_release = 0;
  }
}

}  // namespace

allocator_actor spawn_allocator_actor(caf::actor_system& system, std::shared_ptr<AllocatorService> service,
                                      Observability obs) {
  auto behavior = [](allocator_actor::stateful_pointer<AllocatorActorState> self, std::shared_ptr<AllocatorService> svc,
                     Observability o) -> allocator_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.obs = std::move(o);
    return {
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> wire_bytes {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "allocator", "allocator.batch", {});
          Result<AllocatorBatch> batch = codec::decode<AllocatorBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "allocator", session, batch.error());
            return to_wire(codec::encode(ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          if (st.obs.trace)
            st.obs.trace->flow_finish("allocator", ChromeTraceRecorder::now_us(), flow_id(batch->trace));
          AllocatorBatchReceipt receipt = st.service->apply(SessionId{session}, *batch);
          forward_events(st, self);
          report_pressure(st, self, *batch, receipt);
          log_answered(st.obs.log, "allocator", session, batch->trace, receipt);
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
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReuseLeaseRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "allocator", "reuse.leases", trace);
          std::vector<ReuseLeaseAnswer> answers;
          answers.reserve(requests.size());
          for (const ReuseLeaseRequest& r : requests)
            answers.push_back(self->state.service->reuse_leases(SessionId{session}, r));
          return answers;
        },
        [self](unlease_atom, uint64_t session, TraceContext trace, const std::vector<LeaseId>& leases) {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "allocator", "reuse.release", trace);
          std::vector<uint8_t> released;
          released.reserve(leases.size());
          for (LeaseId l : leases) {
            const AllocatorOutcome out = st.service->apply_one(SessionId{session}, ReleaseLeaseOp{l});
            released.push_back(std::holds_alternative<LeaseReleaseReceipt>(out) ? 1 : 0);
          }
          forward_events(st, self);
          return released;
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(obs));
}

}  // namespace kvrt::actors
