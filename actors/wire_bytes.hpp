#pragma once
// Conversions between codec bytes (std::vector<uint8_t>) and the CAF builtin
// std::vector<char> that carries them, and the log lines every actor writes
// for rejected input and reclaimed sessions (process, actor, session and
// error in each line, issue 5).
#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "services/common/error.hpp"

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

inline void log_reclaim(const std::shared_ptr<spdlog::logger>& log, const char* actor, uint64_t session,
                        uint32_t requests, uint32_t leases) {
  logger_or_default(log).info("actor={} session={} ended: released {} requests and {} leases", actor, session,
                              requests, leases);
}

}  // namespace kvrt::actors
