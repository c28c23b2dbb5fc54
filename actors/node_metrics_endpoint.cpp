#include "actors/node_metrics_endpoint.hpp"

#include <spdlog/spdlog.h>

#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

NodeMetricsEndpoint::NodeMetricsEndpoint(caf::actor_system& system, gateway_actor gateway,
                                         const NodeMetricsConfig& config, metrics::NodeMetricsFacts facts,
                                         const metrics::RouteLatency* latency, metrics::NodeAlertMonitor* alerts)
    : system_(system),
      gateway_(std::move(gateway)),
      config_(config),
      facts_(facts),
      latency_(latency),
      alerts_(alerts) {}

Result<std::unique_ptr<NodeMetricsEndpoint>> NodeMetricsEndpoint::start(
    caf::actor_system& system, gateway_actor gateway, const NodeMetricsConfig& config, metrics::NodeMetricsFacts facts,
    const metrics::RouteLatency* latency, metrics::NodeAlertMonitor* alerts) {
  std::unique_ptr<NodeMetricsEndpoint> out(
      new NodeMetricsEndpoint(system, std::move(gateway), config, facts, latency, alerts));
  NodeMetricsEndpoint* self = out.get();
  out->sampler_ = std::thread([self] { self->sample_until_stopped(); });
  Result<std::unique_ptr<metrics::MetricsHttpServer>> server =
      metrics::MetricsHttpServer::start(config.listen, [self] { return self->render(); });
  if (!server.ok()) return server.error();  // the destructor stops the sampler
  out->server_ = std::move(server).value();
  return out;
}

NodeMetricsEndpoint::~NodeMetricsEndpoint() {
  server_.reset();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

Result<std::vector<OwnerStats>> NodeMetricsEndpoint::read_owner_stats() const {
  Result<std::vector<OwnerStats>> out = make_error(ErrorCode::rpc_failed, "the gateway did not answer", "stats");
  caf::scoped_actor self{system_};
  // Counters only: validate() re-derives every invariant and is not for a
  // scrape's budget (a debug build validates anyway).
  self->request(gateway_, std::chrono::seconds(5), stats_atom::value, false)
      .receive(
          [&](wire_bytes& reply) {
            Result<NodeStatsReceipt> receipt = codec::decode<NodeStatsReceipt>(as_span(reply));
            if (!receipt.ok())
              out = receipt.error();
            else
              out = std::move(receipt->owners);
          },
          [&](caf::error& e) { out = make_error(ErrorCode::rpc_failed, "statistics: " + caf::to_string(e), "stats"); });
  return out;
}

Result<std::string> NodeMetricsEndpoint::render() const {
  Result<std::vector<OwnerStats>> owners = read_owner_stats();
  if (!owners.ok()) return owners.error();
  const metrics::AlertEvaluation alerts = alerts_->current();
  metrics::NodeMetricsSources sources;
  sources.owners = &*owners;
  sources.latency = latency_;
  sources.alerts = &alerts;
  sources.uptime_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  sources.facts = facts_;
  return metrics::render_node_metrics(sources);
}

void NodeMetricsEndpoint::sample_until_stopped() {
  const auto interval = std::chrono::milliseconds(config_.alert_interval_ms);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    if (Result<std::vector<OwnerStats>> owners = read_owner_stats(); owners.ok()) {
      const auto at_ms = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count());
      if (Status s = alerts_->observe(metrics::counter_snapshot(*owners, at_ms)); !s.ok())
        spdlog::warn("kvrt node: alert sample dropped: {}", s.error().describe());
    }
    lock.lock();
    wake_.wait_for(lock, interval, [this] { return stopping_; });
  }
}

}  // namespace kvrt::actors
