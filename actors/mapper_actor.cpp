// The mapper owner's actor: every mapper route is one call on the
// MapperService; a session's end frees its slots as retained capacity.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"

namespace kvrt::actors {

namespace {

struct MapperActorState {
  static inline const char* name = "mapper";
  std::shared_ptr<MapperService> service;
  Observability obs;
};

}  // namespace

mapper_actor spawn_mapper_actor(caf::actor_system& system, std::shared_ptr<MapperService> service, Observability obs) {
  if (!service) return mapper_actor{};
  auto behavior = [](mapper_actor::stateful_pointer<MapperActorState> self, std::shared_ptr<MapperService> svc,
                     Observability o) -> mapper_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.obs = std::move(o);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::mapper>(st.obs, route, session, bytes, [&](const auto& request) {
            return st.service->apply(SessionId{session}, request);
          });
        },
        [self](reuse_atom, uint64_t session, const TraceContext&,
               const std::vector<SlotFrontierRequest>& requests) -> std::vector<SlotFrontierReply> {
          // Every step the session sent before this message is applied: the
          // mailbox is the order (0x06D, map before use).
          std::vector<SlotFrontierReply> out;
          for (const SlotFrontierRequest& r : requests) {
            Result<uint32_t> f = self->state.service->published_frontier(SessionId{session}, r.request);
            out.push_back(f.ok() ? SlotFrontierReply(*f) : SlotFrontierReply(f.error()));
          }
          return out;
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) {
          auto& st = self->state;
          const uint32_t freed = st.service->end_session(SessionId{session});
          log_reclaim(st.obs.log, "mapper", session, freed, 0);
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(obs));
}

}  // namespace kvrt::actors
