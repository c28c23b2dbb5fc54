#pragma once
// The sockaddr_un of a Unix-socket path, or a typed error when the path does
// not fit one (sun_path holds 107 bytes and a NUL on Linux). Every Unix
// socket kvrt opens (the mapper's page pool, the session channel) names its
// path through this, so an over-long token directory is reported the same way.
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include "services/common/result.hpp"

namespace kvrt {

inline Result<sockaddr_un> unix_socket_address(const std::string& path, const std::string& field) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return make_error(ErrorCode::invalid_argument,
                      "socket path of " + std::to_string(path.size()) + " bytes (1 to " +
                          std::to_string(sizeof(addr.sun_path) - 1) + " fit): " + path,
                      field);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace kvrt
