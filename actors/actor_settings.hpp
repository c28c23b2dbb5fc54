#pragma once
// The CAF settings every kvrt process uses (STACK.md): a sharing scheduler
// with few threads and no separate middleman workers roughly halves the
// cross-process round trip on small machines; heartbeats on both sides make
// a hung peer detectable. Include only from actors/*.cpp.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdint>

namespace kvrt::actors {

struct RuntimeSettings {
  uint32_t scheduler_threads = 2;
  uint32_t heartbeat_interval_ms = 250;
  uint32_t connection_timeout_ms = 2000;
};

inline void apply_runtime_settings(caf::actor_system_config& cfg, const RuntimeSettings& s) {
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("scheduler.max-threads", static_cast<size_t>(s.scheduler_threads));
  cfg.set("middleman.workers", static_cast<size_t>(0));
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(s.heartbeat_interval_ms)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(s.connection_timeout_ms)});
  cfg.set("logger.verbosity", caf::atom("quiet"));
}

}  // namespace kvrt::actors
