// The allocator owner's actor: the allocator route and the other owners'
// node-internal calls, each one call on the AllocatorService. What the
// allocator's core reports on the side leaves through explicit queues and is
// forwarded to the index owner after every call that may have produced it:
// the cache identities it dropped (events) and work stuck for capacity
// (pressure, CapacityPressureMonitor).
#include <spdlog/spdlog.h>

#include <chrono>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"

namespace kvrt::actors {

namespace {

struct AllocatorActorState {
  static inline const char* name = "allocator";
  std::shared_ptr<AllocatorService> service;
  Observability obs;
  prefix_actor index;  // where events and pressure go (invalid until the node wires it)
};

using AllocatorSelf = allocator_actor::stateful_pointer<AllocatorActorState>;

// How long an interrupted reclaim waits before it resumes [ms].
constexpr int kReclaimResumeMs = 20;

void forward_side_effects(AllocatorSelf self) {
  auto& st = self->state;
  std::vector<AllocatorEvent> events = st.service->drain_events();
  const std::optional<uint32_t> missing = st.service->take_pressure();
  if (!st.index) return;
  if (!events.empty()) self->send(st.index, events_atom::value, std::move(events));
  if (missing) self->send(st.index, pressure_atom::value, *missing);
}

}  // namespace

allocator_actor spawn_allocator_actor(caf::actor_system& system, std::shared_ptr<AllocatorService> service,
                                      Observability obs) {
  auto behavior = [](AllocatorSelf self, std::shared_ptr<AllocatorService> svc,
                     Observability o) -> allocator_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.obs = std::move(o);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          caf::result<wire_bytes> reply =
              serve_owner_routes<Owner::allocator>(st.obs, route, session, bytes, [&](const auto& request) {
                auto receipt = st.service->apply(SessionId{session}, request);
                if constexpr (std::is_same_v<decltype(receipt), AllocatorBatchReceipt>)
                  for (const AllocatorOutcome& o : receipt.outcomes)
                    if (const auto* e = std::get_if<Error>(&o);
                        e != nullptr && AllocatorService::names_foreign_pool(*e))
                      logger_or_default(st.obs.log)
                          .warn(
                              "actor=allocator session={} presented a handle of a pool this owner does not hold "
                              "(another trust domain's, or none): {}",
                              session, e->describe());
                return receipt;
              });
          forward_side_effects(self);
          return reply;
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) {
          auto& st = self->state;
          const SessionReclaim r = st.service->end_session(SessionId{session});
          forward_side_effects(self);
          // A reclaim stopped by its fault point resumes from this mailbox
          // shortly after: what other messages see meanwhile is an ended
          // session still holding requests, never a live one.
          if (r.interrupted) {
            logger_or_default(st.obs.log)
                .warn(
                    "actor=allocator session={} reclaim interrupted by fault point allocator.{} after {} leases; "
                    "resuming in {} ms",
                    session, AllocatorService::kReclaimFaultPoint, r.leases_released, kReclaimResumeMs);
            self->delayed_send(self, std::chrono::milliseconds(kReclaimResumeMs), end_atom::value, session);
          } else {
            log_reclaim(st.obs.log, "allocator", session, r.requests_released, r.leases_released);
          }
        },
        [self](events_atom, prefix_actor index) { self->state.index = std::move(index); },
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant.namespace_name);
        },
        [self](table_atom, uint64_t session, uint64_t request) -> BlockTableView {
          // An empty view (no groups) says "no such table" to the index,
          // which answers the worker with its own typed error.
          return self->state.service->read_table(SessionId{session}, RequestId{request}).value_or(BlockTableView{});
        },
        [self](tags_atom, const std::vector<CacheKeyTag>& tags) -> std::vector<uint8_t> {
          std::vector<Status> results = self->state.service->tag_cache_keys(tags);
          std::vector<uint8_t> accepted(results.size());
          for (size_t i = 0; i < results.size(); ++i) accepted[i] = results[i].ok() ? 1 : 0;
          return accepted;
        },
        [self](lease_atom, const std::vector<PhysicalBlockHandle>& handles) {
          return self->state.service->lease_for_node(handles);
        },
        [self](unlease_atom, const std::vector<LeaseId>& leases) {
          self->state.service->release_node_leases(leases);
          forward_side_effects(self);
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
          TraceSlice slice(self->state.obs.trace, "allocator", "reuse.release", trace);
          std::vector<uint8_t> released = self->state.service->release_leases(SessionId{session}, leases);
          forward_side_effects(self);
          return released;
        },
        [self](purge_atom, const std::string& namespace_name) -> uint64_t {
          return self->state.service->mark_for_overwrite(namespace_name);
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(obs));
}

}  // namespace kvrt::actors
