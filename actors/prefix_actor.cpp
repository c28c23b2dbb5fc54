// The hash-chain index owner's actor: the prefix route (actors/index_batch.hpp:
// lookups at once, publications as PrefixBatchRun with the allocator owner),
// the allocator's evictions, the grants, and its steps of the reuse
// transaction. The hash chain holds no block: the allocator's own LRU evicts
// its cached blocks on demand, so pressure asks nothing of it.
#include <spdlog/spdlog.h>

#include "actors/index_batch.hpp"

namespace kvrt::actors {

namespace {

struct PrefixActorState {
  static inline const char* name = "prefix_index";
  std::shared_ptr<PrefixService> service;
  allocator_actor allocator;
  Observability obs;
};

using PrefixSelf = prefix_actor::stateful_pointer<PrefixActorState>;

}  // namespace

prefix_actor spawn_prefix_actor(caf::actor_system& system, std::shared_ptr<PrefixService> service,
                                allocator_actor allocator, Observability obs) {
  auto behavior = [](PrefixSelf self, std::shared_ptr<PrefixService> svc, allocator_actor alloc,
                     Observability o) -> prefix_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::prefix_index>(st.obs, route, session, bytes, [&](PrefixBatch batch) {
            return serve_prefix_batch(self, *st.service, st.allocator, st.obs, "prefix_index", SessionId{session},
                                      std::move(batch));
          });
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
        [self](events_atom, const std::vector<AllocatorEvent>& events) { self->state.service->absorb(events); },
        [](pressure_atom, uint32_t) {},
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<PrefixMatchOp>& lookups) {
          TraceSlice slice(self->state.obs.trace, "prefix_index", "reuse.lookups", trace);
          return reuse_candidates(*self->state.service, SessionId{session}, lookups);
        },
        [self](version_atom, TraceContext trace) {
          TraceSlice slice(self->state.obs.trace, "prefix_index", "reuse.version", trace);
          return self->state.service->reuse_version();
        },
        // Hash-chain candidates name no path: nothing to lock or unlock.
        [](reuse_atom, uint64_t, TraceContext, const std::vector<ReusePathLeaseRequest>& requests) {
          return std::vector<ReusePathLeaseAnswer>(
              requests.size(), ReusePathLeaseAnswer{std::nullopt, "the hash-chain index holds no paths"});
        },
        [](unlease_atom, uint64_t, TraceContext, const std::vector<LeaseId>& leases) {
          return std::vector<uint8_t>(leases.size(), 0);
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
