#pragma once
// The node's metrics endpoint ([metrics]): a sampler thread that reads the
// owners' cheap statistics every alert_interval_ms and feeds the live alert
// evaluation (metrics/node_alert_monitor.hpp), and the HTTP server whose
// scrapes render the families of metrics/node_metrics.hpp from a fresh read.
// Both read through the gateway, never an owner's validate(). Include only
// from actors/*.cpp (CAF).
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/actor_protocol.hpp"
#include "metrics/metrics_http_server.hpp"
#include "metrics/node_alert_monitor.hpp"
#include "metrics/node_metrics.hpp"
#include "metrics/route_latency.hpp"
#include "node/node_config.hpp"

namespace kvrt::actors {

class NodeMetricsEndpoint {
 public:
  // Starts the sampler, which feeds `alerts`, and binds config.listen.
  // `latency` and `alerts` outlive this. Errors: the HTTP server's (io when
  // the address cannot be bound).
  static Result<std::unique_ptr<NodeMetricsEndpoint>> start(caf::actor_system& system, gateway_actor gateway,
                                                            const NodeMetricsConfig& config,
                                                            metrics::NodeMetricsFacts facts,
                                                            const metrics::RouteLatency* latency,
                                                            metrics::NodeAlertMonitor* alerts);
  // Stops serving scrapes, then the sampler; before the actor system goes.
  ~NodeMetricsEndpoint();
  NodeMetricsEndpoint(const NodeMetricsEndpoint&) = delete;
  NodeMetricsEndpoint& operator=(const NodeMetricsEndpoint&) = delete;

  const std::string& url() const { return server_->url(); }

 private:
  NodeMetricsEndpoint(caf::actor_system& system, gateway_actor gateway, const NodeMetricsConfig& config,
                      metrics::NodeMetricsFacts facts, const metrics::RouteLatency* latency,
                      metrics::NodeAlertMonitor* alerts);
  Result<std::vector<OwnerStats>> read_owner_stats() const;
  Result<std::string> render() const;
  void sample_until_stopped();

  caf::actor_system& system_;
  gateway_actor gateway_;
  NodeMetricsConfig config_;
  metrics::NodeMetricsFacts facts_;
  const metrics::RouteLatency* latency_;
  metrics::NodeAlertMonitor* alerts_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread sampler_;
  std::unique_ptr<metrics::MetricsHttpServer> server_;
};

}  // namespace kvrt::actors
