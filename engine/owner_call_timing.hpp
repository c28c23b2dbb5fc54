#pragma once
// Receipt latency of an engine session's round trips, by owner, into an
// engine's result: both engine loops (paged blocks and virtual slots)
// report them the same way.
#include "engine/engine_session.hpp"
#include "engine/engine_worker.hpp"

namespace kvrt::engine {

// Every later round trip of `session` appends its latency to `result`'s
// series of its owner (allocator, prefix index, reuse, authorization,
// executor); other owners' are not kept. `result` must outlive the
// session's calls.
void observe_owner_calls(EngineSession& session, EngineResult& result);

}  // namespace kvrt::engine
