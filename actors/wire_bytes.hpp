#pragma once
// Conversions between codec bytes (std::vector<uint8_t>) and the CAF builtin
// std::vector<char> that carries them, and the log lines every actor writes
// for rejected input, answered batches and reclaimed sessions (process,
// actor, session, and the trace id wherever the line is about a message
// that carried one, so one grep follows a message across processes).
#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/trace_context.hpp"

namespace kvrt::actors {

inline std::vector<char> to_wire(const std::vector<uint8_t>& bytes) {
  return std::vector<char>(bytes.begin(), bytes.end());
}
inline std::span<const uint8_t> as_span(const std::vector<char>& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

inline spdlog::logger& logger_or_default(const std::shared_ptr<spdlog::logger>& log) {
  return log ? *log : *spdlog::default_logger();
}

inline void log_rejected(const std::shared_ptr<spdlog::logger>& log, const char* actor, uint64_t session,
                         const Error& e) {
  logger_or_default(log).warn("actor={} session={} rejected malformed message: {}", actor, session, e.describe());
}

// One debug line per answered call (`--log-level debug`; a level check and
// nothing else otherwise): the trace and span ids tie the line to the
// worker's call and to the `--trace` slices of the same message. A batch's
// line counts its operations and the typed errors among its outcomes.
template <class Receipt>
void log_answered(const std::shared_ptr<spdlog::logger>& log, const char* actor, uint64_t session,
                  const TraceContext& trace, const Receipt& receipt) {
  spdlog::logger& l = logger_or_default(log);
  if (!l.should_log(spdlog::level::debug)) return;
  if constexpr (requires { receipt.outcomes; }) {
    const auto errors = std::count_if(receipt.outcomes.begin(), receipt.outcomes.end(),
                                      [](const auto& o) { return std::holds_alternative<Error>(o); });
    l.debug("actor={} session={} trace={:016x} span={:016x} answered ops={} typed_errors={}", actor, session,
            trace.trace_id, trace.span_id, receipt.outcomes.size(), errors);
  } else {
    l.debug("actor={} session={} trace={:016x} span={:016x} answered", actor, session, trace.trace_id, trace.span_id);
  }
}

// A whole request the owner refused (a grant it does not give).
inline void log_refused(const std::shared_ptr<spdlog::logger>& log, const char* actor, uint64_t session,
                        const TraceContext& trace, const Error& e) {
  spdlog::logger& l = logger_or_default(log);
  if (!l.should_log(spdlog::level::debug)) return;
  l.debug("actor={} session={} trace={:016x} span={:016x} refused: {}", actor, session, trace.trace_id, trace.span_id,
          e.describe());
}

inline void log_reclaim(const std::shared_ptr<spdlog::logger>& log, const char* actor, uint64_t session,
                        uint32_t requests, uint32_t leases) {
  logger_or_default(log).info("actor={} session={} ended: released {} requests and {} leases", actor, session, requests,
                              leases);
}

}  // namespace kvrt::actors
