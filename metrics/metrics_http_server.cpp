#include "metrics/metrics_http_server.hpp"

#include <httplib.h>

namespace kvrt::metrics {

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::start(const std::string& listen, Render render) {
  std::pair<std::string, uint16_t> address;
  KVRT_TRY_ASSIGN(address, parse_listen_address(listen));
  std::unique_ptr<MetricsHttpServer> out(new MetricsHttpServer());
  out->server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *out->server_;
  // Two workers: a scrape and an operator's curl at once; more scrapers wait.
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  s.set_read_timeout(std::chrono::seconds(5));
  s.set_write_timeout(std::chrono::seconds(5));
  s.set_payload_max_length(4096);  // a scrape carries no body
  s.Get("/metrics", [render = std::move(render)](const httplib::Request&, httplib::Response& res) {
    Result<std::string> text = render();
    if (!text.ok()) {
      res.status = 503;
      res.set_content("kvrt: the node's metrics cannot be read now: " + text.error().describe() + "\n",
                      "text/plain; charset=utf-8");
      return;
    }
    res.set_content(std::move(*text), "text/plain; version=0.0.4; charset=utf-8");
  });
  int port = address.second;
  if (port == 0) {
    port = s.bind_to_any_port(address.first);
    if (port < 0) port = 0;
  } else if (!s.bind_to_port(address.first, port)) {
    port = 0;
  }
  if (port == 0)
    return make_error(ErrorCode::io, "cannot listen for scrapes on " + listen + " (in use, or not an address here)",
                      "metrics.listen");
  const bool v6 = address.first.find(':') != std::string::npos;
  out->url_ = "http://" + (v6 ? "[" + address.first + "]" : address.first) + ":" + std::to_string(port) + "/metrics";
  out->thread_ = std::thread([&s] { s.listen_after_bind(); });
  return out;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kvrt::metrics
