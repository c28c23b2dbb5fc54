#pragma once
// Connecting CAF's middleman to a node's gateway without waiting on a node
// that died during the connect.
//
// CAF 0.17's remote_actor() blocks its caller, with no time limit, on the
// middleman's own blocking connect(). A connect whose SYN reaches the node's
// listening socket while the kernel closes it (the node was just killed) is
// dropped without an answer, and the kernel retries it only after its
// initial retransmission timeout (1 s): the connect then takes 1-2 s to
// answer "refused", and minutes to a listener that accepts nothing. So the
// caller asks the middleman once, through a small actor of its own, and
// while it waits for the answer it looks at the node's process (pid and
// start time, from its descriptor) every 25 ms: a node that has exited is
// node_unreachable at once.
//
// The middleman's thread stays in that connect() until the kernel answers,
// and an actor system's destructor waits for it. A caller that gave up on
// such a connect hands the system to retire_in_background() rather than
// destroying it on its own thread.
#include <chrono>
#include <memory>

#include "actors/actor_protocol.hpp"
#include "services/common/result.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt::actors {

struct GatewayConnection {
  Result<gateway_actor> gateway;
  // The middleman may still be inside connect(): destroying its actor
  // system now would wait for the kernel's answer.
  bool connect_in_flight = false;
};

// Errors: node_unreachable when the node refuses or cannot be reached, when
// its process exits before the connect completes, or when no answer came
// within `timeout`; rpc_failed when the port serves no gateway.
GatewayConnection connect_gateway(caf::actor_system& system, const NodeDescriptor& node,
                                  std::chrono::milliseconds timeout);

// Destroys `owner` on a thread of its own. A process that exits (static
// destruction) waits up to 3 s for those threads, which a connect raced by
// a node's death needs about 1 s of; a thread still waiting on the kernel
// after that ends with the process.
void retire_in_background(std::shared_ptr<void> owner);

}  // namespace kvrt::actors
