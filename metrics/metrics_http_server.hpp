#pragma once
// The node's scrape endpoint: `GET /metrics` answers the text exposition a
// callback renders (Content-Type text/plain; version=0.0.4), anything else
// 404, a render that fails 503 with its error. Served by cpp-httplib on two
// threads of its own, so a slow scraper never holds an owner: the callback
// reads the owners' cheap counters, never their validate().
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "metrics/listen_address.hpp"
#include "services/common/result.hpp"

namespace httplib {
class Server;
}

namespace kvrt::metrics {

class MetricsHttpServer {
 public:
  using Render = std::function<Result<std::string>()>;

  // Binds `listen` ("host:port"; port 0 picks a free one) and serves.
  // Errors: invalid_argument (field "metrics.listen") for an address that
  // is not host:port, io when it cannot bind.
  static Result<std::unique_ptr<MetricsHttpServer>> start(const std::string& listen, Render render);
  // Stops accepting, finishes the scrapes in flight, joins the threads.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // "http://host:port/metrics" with the bound port.
  const std::string& url() const { return url_; }

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string url_;
};

}  // namespace kvrt::metrics
