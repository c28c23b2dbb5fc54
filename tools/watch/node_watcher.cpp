#include "tools/watch/node_watcher.hpp"

#include <chrono>
#include <ctime>

namespace kvrt::watch {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<std::unique_ptr<NodeWatcher>> NodeWatcher::connect(const std::string& descriptor_path) {
  std::unique_ptr<NodeWatcher> out(new NodeWatcher());
  KVRT_TRY_ASSIGN(out->descriptor_, read_node_descriptor(descriptor_path));
  KVRT_TRY_ASSIGN(out->reader_, NodeStatsReader::connect(out->descriptor_));
  return out;
}

Result<NodeViewSample> NodeWatcher::read() {
  NodeViewSample s;
  s.t_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.wall_utc = utc_now();
  KVRT_TRY_ASSIGN(s.stats, reader_->read(false, std::chrono::seconds(5)));
  if (!descriptor_.metrics_url.empty())
    if (Result<std::string> text = fetch_scrape(descriptor_.metrics_url, std::chrono::seconds(2)); text.ok())
      s.latency = parse_route_latency(*text);
  return s;
}

}  // namespace kvrt::watch
