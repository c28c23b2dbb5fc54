#include "metrics/listen_address.hpp"

#include <charconv>

namespace kvrt::metrics {

Result<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& listen) {
  const auto bad = [&] {
    return make_error(ErrorCode::invalid_argument,
                      "metrics.listen must be host:port (port 0 picks a free one), e.g. 127.0.0.1:9400",
                      "metrics.listen");
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) return bad();
  std::string host = listen.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return bad();
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  const char* first = listen.data() + colon + 1;
  const char* last = listen.data() + listen.size();
  const auto r = std::from_chars(first, last, port);
  if (r.ec != std::errc{} || r.ptr != last || port > 65535) return bad();
  return std::pair<std::string, uint16_t>{host, static_cast<uint16_t>(port)};
}

}  // namespace kvrt::metrics
