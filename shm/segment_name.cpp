#include "shm/segment_name.hpp"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <random>

#include "services/common/process_identity.hpp"

namespace kvrt::shm {
namespace {

bool kept_verbatim(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

std::string escape_name_component(std::string_view raw) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(raw.size());
  for (unsigned char c : raw) {
    if (kept_verbatim(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      // '~' is itself escaped, so "~XX" in the output always means one byte.
      out.push_back('~');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

Result<std::string> pool_segment_name(const PoolSegmentName& parts) {
  if (parts.namespace_name.empty())
    return make_error(ErrorCode::invalid_argument, "cache namespace name is empty", "namespace_name");
  if (parts.instance.empty()) return make_error(ErrorCode::invalid_argument, "instance id is empty", "instance");
  std::string name = "/kvrt.";
  name += escape_name_component(parts.namespace_name);
  name += ".g" + std::to_string(parts.namespace_generation.value);
  name += ".c" + std::to_string(parts.group.value);
  name += '.';
  name += escape_name_component(parts.instance);
  // shm_open names one file in /dev/shm: at most NAME_MAX bytes after the '/'.
  if (name.size() - 1 > NAME_MAX)
    return make_error(ErrorCode::invalid_argument,
                      "segment name is " + std::to_string(name.size() - 1) + " bytes after escaping; the limit is " +
                          std::to_string(NAME_MAX),
                      "namespace_name");
  return name;
}

std::string make_instance_id() {
  static std::atomic<uint64_t> sequence{0};
  static const uint32_t random_part = [] {
    std::random_device rd;
    return static_cast<uint32_t>(rd());
  }();
  auto self = current_process_identity();
  const uint64_t start = self.ok() ? self->start_time_ticks : 0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "p%d-%llu-%08x-%llu", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(start), random_part,
                static_cast<unsigned long long>(sequence.fetch_add(1)));
  return buf;
}

}  // namespace kvrt::shm
