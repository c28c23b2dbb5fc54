// The prefix-index owner's actor, for either index the node runs ([node]
// prefix_index): the hash chain (PrefixService) or the radix tree
// (RadixBlockService). Both answer the same prefix route
// (actors/index_batch.hpp: lookups at once, publications as a PrefixBatchRun
// with the allocator owner) and the same steps of the reuse transaction, so
// sessions, engines and receipts do not change. Where the two differ, the
// service decides: the hash chain absorbs the allocator's evictions and holds
// no path or block; the tree leases what it caches, locks paths, and gives
// pages back, leaf first, when the allocator reports work stuck for capacity.
// Each handler is one call on the service.
#include <spdlog/spdlog.h>

#include "actors/index_batch.hpp"

namespace kvrt::actors {

namespace {

template <class Service>
constexpr const char* index_actor_name() {
  if constexpr (std::is_same_v<Service, RadixBlockService>)
    return "radix_index";
  else
    return "prefix_index";
}

template <class Service>
struct IndexActorState {
  static inline const char* name = index_actor_name<Service>();
  std::shared_ptr<Service> service;
  allocator_actor allocator;
  Observability obs;
};

template <class Service>
prefix_actor spawn_index_actor(caf::actor_system& system, std::shared_ptr<Service> service, allocator_actor allocator,
                               Observability obs) {
  using Self = typename prefix_actor::template stateful_pointer<IndexActorState<Service>>;
  auto behavior = [](Self self, std::shared_ptr<Service> svc, allocator_actor alloc,
                     Observability o) -> prefix_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    constexpr const char* actor = index_actor_name<Service>();
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::prefix_index>(st.obs, route, session, bytes, [&](PrefixBatch batch) {
            return serve_prefix_batch(self, *st.service, st.allocator, st.obs, actor, SessionId{session},
                                      std::move(batch));
          });
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
        [self](events_atom, const std::vector<AllocatorEvent>& events) { (void)self->state.service->absorb(events); },
        [self](pressure_atom, uint32_t missing_blocks) {
          std::vector<LeaseId> leases = self->state.service->relieve_pressure(missing_blocks);
          if (!leases.empty()) self->send(self->state.allocator, unlease_atom::value, std::move(leases));
        },
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](advance_atom, const std::string& namespace_name, uint64_t generation) {
          std::vector<LeaseId> leases =
              self->state.service->advance_generation(namespace_name, NamespaceGeneration{generation});
          if (!leases.empty()) self->send(self->state.allocator, unlease_atom::value, std::move(leases));
        },
        [self](purge_atom, const std::string& namespace_name, uint64_t generation) -> uint64_t {
          const uint64_t before = self->state.service->invalidated_pages();
          std::vector<LeaseId> leases =
              self->state.service->advance_generation(namespace_name, NamespaceGeneration{generation});
          const uint64_t pages = self->state.service->invalidated_pages() - before;
          if (!leases.empty()) self->send(self->state.allocator, unlease_atom::value, std::move(leases));
          return pages;
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<PrefixMatchOp>& lookups) {
          TraceSlice slice(self->state.obs.trace, actor, "reuse.lookups", trace);
          return reuse_candidates(*self->state.service, SessionId{session}, lookups);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReusePathLeaseRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, actor, "reuse.paths", trace);
          std::vector<ReusePathLeaseAnswer> answers;
          answers.reserve(requests.size());
          for (const ReusePathLeaseRequest& r : requests)
            answers.push_back(self->state.service->lease_path(SessionId{session}, r));
          return answers;
        },
        [self](version_atom, TraceContext trace) {
          TraceSlice slice(self->state.obs.trace, actor, "reuse.version", trace);
          return self->state.service->reuse_version();
        },
        [self](unlease_atom, uint64_t session, TraceContext trace, const std::vector<LeaseId>& leases) {
          TraceSlice slice(self->state.obs.trace, actor, "reuse.release", trace);
          std::vector<uint8_t> released;
          released.reserve(leases.size());
          for (LeaseId l : leases) released.push_back(self->state.service->release_path(SessionId{session}, l) ? 1 : 0);
          return released;
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace

prefix_actor spawn_prefix_actor(caf::actor_system& system, std::shared_ptr<PrefixService> service,
                                allocator_actor allocator, Observability obs) {
  return spawn_index_actor(system, std::move(service), std::move(allocator), std::move(obs));
}

prefix_actor spawn_radix_prefix_actor(caf::actor_system& system, std::shared_ptr<RadixBlockService> service,
                                      allocator_actor allocator, Observability obs) {
  return spawn_index_actor(system, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
