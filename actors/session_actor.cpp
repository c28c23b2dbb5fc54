// A worker's session on the node: stamps the session id and delegates the
// untouched bytes to the route's owner (services/session/routes.hpp), whose
// reply goes straight to the worker (CAF delegation keeps one network round
// trip and no copy here). The ping route is its own echo: the transport
// alone (`kvrt bench rpc`).
#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"

namespace kvrt::actors {

namespace {

struct SessionActorState {
  static inline const char* name = "session";
  SessionId session;
  RouteAccess role = RouteAccess::worker;  // the principal's: which routes it may call
  OwnerHandles owners;
};

}  // namespace

session_actor spawn_session_actor(caf::actor_system& system, SessionId session, RouteAccess role, OwnerHandles owners) {
  auto behavior = [](session_actor::stateful_pointer<SessionActorState> self, SessionId id, RouteAccess r,
                     OwnerHandles handles) -> session_actor::behavior_type {
    self->state.session = id;
    self->state.role = r;
    self->state.owners = std::move(handles);
    return {
        [self](route_atom, uint16_t route, wire_bytes& bytes) -> caf::result<wire_bytes> {
          const RouteId id{route};
          if (id == kPingRoute) return std::move(bytes);
          if (id == kAttachRoute || id == kHelloRoute || !is_known_route(id))
            return error_reply(make_error(
                ErrorCode::invalid_argument,
                "no route " + std::to_string(route) + " (" + std::string(route_name(id)) + ") leads to an owner",
                "route"));
          if (route_access(id) != self->state.role)
            return error_reply(make_error(ErrorCode::authorization_route_denied,
                                          "route " + std::string(route_name(id)) + " is for " +
                                              (route_access(id) == RouteAccess::admin ? "admin" : "worker") +
                                              " sessions; this session's principal is " +
                                              (self->state.role == RouteAccess::admin ? "an admin" : "a worker"),
                                          "route"));
          const Owner owner = route_owner(id);
          owner_interface handle = self->state.owners.of(owner);
          if (!handle)
            return error_reply(make_error(ErrorCode::invalid_argument,
                                          "this node serves no " + std::string(owner_name(owner)) +
                                              " (its section is absent from the node's config)",
                                          std::string(owner_name(owner))));
          return self->delegate(handle, route_atom::value, route, self->state.session.value, std::move(bytes));
        },
    };
  };
  return system.spawn(behavior, session, role, std::move(owners));
}

}  // namespace kvrt::actors
