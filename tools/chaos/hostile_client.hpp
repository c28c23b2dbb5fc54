#pragma once
// A hostile client: the live-node fuzzer of a fault campaign. It holds a
// worker session like any other and, for a bounded time, sends the node what
// an honest worker never does:
//   - requests of every worker route built from random fields (ids that name
//     nothing or someone else's, lengths past the layout, unknown
//     namespaces), as they are or with their Cap'n Proto bytes mutated (bits
//     flipped, bytes overwritten, cut short, lengthened, a span repeated),
//     and plain random bytes, on the session channel and on the middleman;
//   - frames the channel must refuse: a route nobody declared, non-zero
//     flags, a payload above the limit, a request before the attach frame,
//     a wrong ticket, a frame cut off by a closed connection, a mutated
//     hello with a forged token (answered with an ErrorMessage, then closed).
// Every request must be answered by its route's receipt or by an
// ErrorMessage; a refused frame must make the node close that connection.
// Anything else (no reply, a reply that is neither, a call that times out)
// is reported as unexpected, and the campaign counts it as a violation. The
// honest workers running beside it must stay exact, and the node valid.
#include <chrono>
#include <cstdint>
#include <string>

#include "services/common/result.hpp"
#include "services/session/node_descriptor.hpp"

namespace kvrt::chaos {

struct HostileClientOptions {
  NodeDescriptor node;
  std::string token_hex;  // a worker principal's token
  std::string name = "hostile";
  uint64_t seed = 1;
  std::chrono::milliseconds duration{1000};
  std::chrono::milliseconds call_timeout{10000};  // a reply later than this is unexpected
};

struct HostileClientSummary {
  uint64_t requests_channel = 0, requests_middleman = 0;  // requests sent on each transport
  uint64_t mutated = 0;                                   // of those, with mutated or random bytes
  uint64_t receipts = 0;                                  // answered with the route's receipt
  uint64_t typed_errors = 0;                              // answered with an ErrorMessage
  uint64_t frames_refused = 0;                            // bad frames after which the node closed the connection
  uint64_t unexpected = 0;                                // anything else: a violation
  std::string first_unexpected;
  // The session was lost (the node died or reclaimed it): the client stopped.
  bool session_lost = false;
};

Result<HostileClientSummary> run_hostile_client(const HostileClientOptions& options);

}  // namespace kvrt::chaos
