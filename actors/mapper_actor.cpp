// The mapper owner's actor (issue 6 with issue 5): decodes a MapperBatch,
// applies it to the MapperService in one call, encodes the
// MapperBatchReceipt. Bytes that do not decode answer an encoded typed Error
// and the actor keeps serving. A session's end frees its slots.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

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
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> wire_bytes {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "mapper", "mapper.batch", {});
          Result<MapperBatch> batch = codec::decode<MapperBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "mapper", session, batch.error());
            return to_wire(codec::encode(ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          const MapperBatchReceipt receipt = st.service->apply(SessionId{session}, *batch);
          log_answered(st.obs.log, "mapper", session, batch->trace, receipt);
          return to_wire(codec::encode(receipt));
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
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
