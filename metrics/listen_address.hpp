#pragma once
// The scrape endpoint's address, as [metrics] listen gives it.
#include <cstdint>
#include <string>
#include <utility>

#include "services/common/result.hpp"

namespace kvrt::metrics {

// Splits "host:port" (port 0 picks a free one); the host may be a
// bracketed IPv6 address. Errors: invalid_argument, field "metrics.listen".
Result<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& listen);

}  // namespace kvrt::metrics
