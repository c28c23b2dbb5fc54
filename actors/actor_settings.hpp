#pragma once
// The CAF settings every kvrt process uses (docs/stack-notes.md): a sharing scheduler
// with few threads and no separate middleman workers roughly halves the
// cross-process round trip on small machines; heartbeats on both sides make
// a hung peer detectable. Include only from actors/*.cpp.
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdint>

namespace kvrt::actors {

// sharing: for processes whose messages cross the middleman (node, worker);
// it roughly halves the cross-process round trip here (docs/stack-notes.md).
// stealing: for actors that talk only within one process (an engine embedded
// as actors beside the owners). A message to an idle actor is queued on the
// sender's own worker and runs there next, without waking another thread:
// `kvrt bench rpc` measures an in-process round trip of 2.8 us p50 this way
// against 11.8 us under sharing, whose every enqueue wakes the other worker.
enum class SchedulerPolicy : uint8_t { sharing = 0, stealing = 1 };

struct RuntimeSettings {
  uint32_t scheduler_threads = 2;
  uint32_t heartbeat_interval_ms = 250;
  uint32_t connection_timeout_ms = 2000;
  SchedulerPolicy policy = SchedulerPolicy::sharing;
  // stealing only: empty polls of a thread's queue before it starts to sleep
  // between polls (0: CAF's default of 100). A node that polls takes a
  // message from the middleman's thread or another owner without a wake-up
  // ([node] scheduler = "polling").
  uint32_t poll_attempts = 0;
};

inline void apply_runtime_settings(caf::actor_system_config& cfg, const RuntimeSettings& s) {
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.policy", s.policy == SchedulerPolicy::sharing ? caf::atom("sharing") : caf::atom("stealing"));
  cfg.set("scheduler.max-threads", static_cast<size_t>(s.scheduler_threads));
  cfg.set("middleman.workers", static_cast<size_t>(0));
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(s.heartbeat_interval_ms)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(s.connection_timeout_ms)});
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (s.policy == SchedulerPolicy::stealing && s.poll_attempts > 0)
    cfg.set("work-stealing.aggressive-poll-attempts", static_cast<size_t>(s.poll_attempts));
}

}  // namespace kvrt::actors
