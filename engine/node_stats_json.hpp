// A node's statistics as one JSON object: what `kvrt stats --json` prints
// and libkvrt's kvrt_stats_json returns. At the top level validated,
// validate_ok, leaked_blocks, refcount_delta, live_leases and
// workers_connected, then the node's reuse funnel (0x0CF, both owners'
// counters joined), then each owner's values under "owners".
#pragma once

#include <nlohmann/json.hpp>

#include "actors/client.hpp"

namespace kvrt {

nlohmann::ordered_json node_stats_json(const NodeStats& stats);

}  // namespace kvrt
