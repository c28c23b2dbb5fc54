// A worker's session on the node: stamps the session id and delegates the
// untouched bytes to the owner, whose reply goes straight to the worker (CAF
// delegation keeps one network round trip and no copy here). The ping echo
// measures the transport alone (`kvrt bench rpc`).
#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

namespace {

struct SessionActorState {
  static inline const char* name = "session";
  SessionId session;
  OwnerHandles owners;
};

}  // namespace

session_actor spawn_session_actor(caf::actor_system& system, SessionId session, OwnerHandles owners) {
  auto behavior = [](session_actor::stateful_pointer<SessionActorState> self, SessionId id,
                     OwnerHandles handles) -> session_actor::behavior_type {
    self->state.session = id;
    self->state.owners = std::move(handles);
    return {
        [self](alloc_atom, wire_bytes& bytes) {
          return self->delegate(self->state.owners.allocator, batch_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [self](prefix_atom, wire_bytes& bytes) {
          return self->delegate(self->state.owners.prefix, batch_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [self](authorize_atom, wire_bytes& bytes) {
          return self->delegate(self->state.owners.authorization, authorize_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [self](mapper_atom, wire_bytes& bytes) -> caf::result<wire_bytes> {
          if (!self->state.owners.mapper)
            return to_wire(codec::encode(
                ErrorMessage{make_error(ErrorCode::invalid_argument,
                                        "this node serves no mapper ([mapper] is absent from its config)", "mapper")}));
          return self->delegate(self->state.owners.mapper, batch_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [self](exec_atom, wire_bytes& bytes) {
          return self->delegate(self->state.owners.executor, batch_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [self](reuse_atom, wire_bytes& bytes) {
          return self->delegate(self->state.owners.reuse, batch_atom::value, self->state.session.value,
                                std::move(bytes));
        },
        [](ping_atom, wire_bytes& bytes) -> wire_bytes { return std::move(bytes); },
    };
  };
  return system.spawn(behavior, session, std::move(owners));
}

}  // namespace kvrt::actors
