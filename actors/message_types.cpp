// Registration of every type that crosses a process boundary. The wire
// payloads are std::vector<char> (a CAF builtin) and handles are caf::actor,
// so the list is short; the round-trip test of every message kind
// (tests/node_process_test.cpp) fails loudly if one goes missing (STACK.md:
// a missing registration otherwise fails silently).
#include "actors/actor_protocol.hpp"

namespace kvrt::actors {

void add_message_types(caf::actor_system_config& cfg) {
  // Builtins need no registration in CAF 0.17 (std::vector<char>, caf::actor,
  // integers, atoms); the typed interfaces are checked at connect time by
  // remote_actor<gateway_actor>.
  (void)cfg;
}

}  // namespace kvrt::actors
