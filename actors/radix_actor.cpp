// The radix index owner's actor. It answers the same prefix route as the
// hash-chain index (actors/index_batch.hpp), so sessions, engines and
// receipts do not change; a publication leases every adopted block to the
// node, and the tree gives pages back, leaf first, when the allocator
// reports work stuck for capacity. Also its steps of the reuse transaction,
// path leases included.
#include <spdlog/spdlog.h>

#include "actors/index_batch.hpp"

namespace kvrt::actors {

namespace {

struct RadixActorState {
  static inline const char* name = "radix_index";
  std::shared_ptr<RadixBlockService> service;
  allocator_actor allocator;
  Observability obs;
};

using RadixSelf = prefix_actor::stateful_pointer<RadixActorState>;

void release_node_leases(RadixSelf self, std::vector<LeaseId> leases) {
  if (!leases.empty()) self->send(self->state.allocator, unlease_atom::value, std::move(leases));
}

}  // namespace

prefix_actor spawn_radix_prefix_actor(caf::actor_system& system, std::shared_ptr<RadixBlockService> service,
                                      allocator_actor allocator, Observability obs) {
  auto behavior = [](RadixSelf self, std::shared_ptr<RadixBlockService> svc, allocator_actor alloc,
                     Observability o) -> prefix_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::prefix_index>(st.obs, route, session, bytes, [&](PrefixBatch batch) {
            return serve_prefix_batch(self, *st.service, st.allocator, st.obs, "radix_index", SessionId{session},
                                      std::move(batch));
          });
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
        // The allocator never evicts a block the tree leases, so its events
        // name nothing the tree holds.
        [](events_atom, const std::vector<AllocatorEvent>&) {},
        [self](pressure_atom, uint32_t missing_blocks) {
          release_node_leases(self, self->state.service->relieve_pressure(missing_blocks));
        },
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<PrefixMatchOp>& lookups) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.lookups", trace);
          return reuse_candidates(*self->state.service, SessionId{session}, lookups);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReusePathLeaseRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.paths", trace);
          std::vector<ReusePathLeaseAnswer> answers;
          answers.reserve(requests.size());
          for (const ReusePathLeaseRequest& r : requests)
            answers.push_back(self->state.service->lease_path(SessionId{session}, r));
          return answers;
        },
        [self](version_atom, TraceContext trace) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.version", trace);
          return self->state.service->reuse_version();
        },
        [self](unlease_atom, uint64_t session, TraceContext trace, const std::vector<LeaseId>& leases) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.release", trace);
          std::vector<uint8_t> released;
          released.reserve(leases.size());
          for (LeaseId l : leases) released.push_back(self->state.service->release_path(SessionId{session}, l) ? 1 : 0);
          return released;
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
