// The namespace / authorization owner's actor. A grant reaches the index
// owners before the worker hears of it: the grant message is enqueued in the
// prefix index's mailbox before this actor replies, so any lookup the worker
// sends afterwards finds it there (CAF delivers in order per sender, and a
// local send enqueues at once).
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "services/common/overloaded.hpp"

namespace kvrt::actors {

namespace {

struct AuthorizationActorState {
  static inline const char* name = "authorization";
  std::shared_ptr<AuthorizationService> service;
  prefix_actor prefix;
  Observability obs;
};

}  // namespace

authorization_actor spawn_authorization_actor(caf::actor_system& system, std::shared_ptr<AuthorizationService> service,
                                              prefix_actor prefix, Observability obs) {
  auto behavior = [](authorization_actor::stateful_pointer<AuthorizationActorState> self,
                     std::shared_ptr<AuthorizationService> svc, prefix_actor pre,
                     Observability o) -> authorization_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.prefix = std::move(pre);
    self->state.obs = std::move(o);
    return {
        [self](hello_atom, const wire_bytes& bytes) -> wire_bytes {
          auto& st = self->state;
          Result<HelloRequest> hello = codec::decode<HelloRequest>(as_span(bytes));
          if (!hello.ok()) {
            log_rejected(st.obs.log, "authorization", 0, hello.error());
            return error_reply(hello.error());
          }
          Result<OpenedSession> opened = st.service->open_session(*hello);
          if (!opened.ok()) {
            logger_or_default(st.obs.log)
                .warn("actor=authorization worker={} refused: {}", hello->worker_name, opened.error().describe());
            return error_reply(opened.error());
          }
          logger_or_default(st.obs.log)
              .info("actor=authorization session={} opened for principal {} (worker {}, pid {})", opened->session.value,
                    opened->principal, hello->worker_name, hello->process_id);
          SessionReceipt r;
          r.session = opened->session;
          r.principal = opened->principal;
          r.allowed_namespaces = opened->allowed_namespaces;
          r.admin = opened->admin;
          return to_wire(codec::encode(r));
        },
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::authorization>(
              st.obs, route, session, bytes,
              overloaded{
                  [&](const AuthorizeRequest& req) -> Result<NamespaceGrantReceipt> {
                    Result<IssuedGrant> grant = st.service->authorize(SessionId{session}, req);
                    if (!grant.ok()) return grant.error();
                    // Enqueued before the reply: see the top of this file.
                    self->send(st.prefix, grant_atom::value, session, grant->for_indexes);
                    return grant->receipt;
                  },
                  [&](const NamespaceInvalidateRequest& req) -> Result<NamespaceInvalidationReceipt> {
                    Result<NamespaceInvalidationReceipt> r = st.service->apply(SessionId{session}, req);
                    if (!r.ok()) return r;
                    // Enqueued before the reply and before any grant of the
                    // new generation: the index ends the old grants first.
                    self->send(st.prefix, advance_atom::value, r->namespace_name, r->new_generation.value);
                    logger_or_default(st.obs.log)
                        .info(
                            "actor=authorization namespace {} invalidated ({}): generation {} -> {}, {} grant(s) "
                            "ended",
                            r->namespace_name, to_string(r->cause), r->old_generation.value, r->new_generation.value,
                            r->ended_grants);
                    return r;
                  },
                  [&](const NamespaceStatusRequest& req) { return st.service->apply(SessionId{session}, req); },
              });
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReuseKeyRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "authorization", "reuse.keys", trace);
          std::vector<ReuseKeyAnswer> answers;
          answers.reserve(requests.size());
          for (const ReuseKeyRequest& r : requests)
            answers.push_back(self->state.service->reuse_key(SessionId{session}, r));
          return answers;
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) {
          const Status st = self->state.service->end_session(SessionId{session});
          if (!st.ok())
            logger_or_default(self->state.obs.log)
                .warn("actor=authorization session={} end: {}", session, st.error().describe());
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(prefix), std::move(obs));
}

}  // namespace kvrt::actors
