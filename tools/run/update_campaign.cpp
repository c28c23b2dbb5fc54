// The updates of a `kvrt run` pass. See update_campaign.hpp.
#include "tools/run/update_campaign.hpp"

#include "actors/client.hpp"

namespace kvrt {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

const char* to_string(UpdateKind kind) {
  switch (kind) {
    case UpdateKind::weights:
      return "weights";
    case UpdateKind::adapter:
      return "adapter";
    case UpdateKind::purge:
      return "purge";
  }
  return "unknown";
}

Result<std::unique_ptr<UpdateCampaign>> UpdateCampaign::start(const NodeDescriptor& node,
                                                              const UpdateSchedule& schedule,
                                                              std::vector<std::string> namespaces,
                                                              uint64_t base_model_generation) {
  Result<std::string> token = read_token_file(node.token_path(schedule.admin_principal));
  if (!token.ok()) return token.error();
  ClientOptions o;
  o.worker_name = schedule.admin_principal;
  // A purge waits for g's receipts up to its deadline, then for the owners.
  o.timeout = std::chrono::milliseconds(10000 + schedule.purge_deadline_ms);
  Result<std::unique_ptr<Client>> client = Client::connect(node, *token, o);
  if (!client.ok()) return client.error();
  std::unique_ptr<UpdateCampaign> c(
      new UpdateCampaign(std::move(*client), schedule, std::move(namespaces), base_model_generation));
  c->thread_ = std::thread([raw = c.get()] { raw->run(); });
  return c;
}

UpdateCampaign::UpdateCampaign(std::unique_ptr<Client> admin, UpdateSchedule schedule,
                               std::vector<std::string> namespaces, uint64_t base_model_generation)
    : admin_(std::move(admin)),
      schedule_(std::move(schedule)),
      namespaces_(std::move(namespaces)),
      model_generation_(base_model_generation) {}

UpdateCampaign::~UpdateCampaign() { stop(); }

std::vector<UpdateEvent> UpdateCampaign::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return events_;
}

void UpdateCampaign::run() {
  const Clock::time_point start = Clock::now();
  auto period = [](uint32_t ms) { return std::chrono::milliseconds(ms); };
  // The next firing of each kind; a kind that is off never fires.
  Clock::time_point next_weights = start + period(schedule_.weights_every_ms);
  Clock::time_point next_adapter = start + period(schedule_.adapter_every_ms);
  Clock::time_point next_purge = start + period(schedule_.purge_tenant_every_ms);
  const Clock::time_point never = Clock::time_point::max();
  if (schedule_.weights_every_ms == 0) next_weights = never;
  if (schedule_.adapter_every_ms == 0) next_adapter = never;
  if (schedule_.purge_tenant_every_ms == 0 || namespaces_.empty()) next_purge = never;
  while (true) {
    const Clock::time_point due = std::min({next_weights, next_adapter, next_purge});
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_until(lock, due, [this] { return stopping_; })) return;
    }
    const Clock::time_point now = Clock::now();
    const double at_s = std::chrono::duration<double>(now - start).count();
    // A kind whose period passed while a slow call ran fires once, and its
    // next firing is a period after now: the schedule never bursts.
    if (now >= next_weights) {
      update_weights(at_s);
      next_weights = Clock::now() + period(schedule_.weights_every_ms);
    }
    if (now >= next_adapter) {
      swap_adapter(at_s);
      next_adapter = Clock::now() + period(schedule_.adapter_every_ms);
    }
    if (now >= next_purge) {
      purge_next_tenant(at_s);
      next_purge = Clock::now() + period(schedule_.purge_tenant_every_ms);
    }
  }
}

void UpdateCampaign::update_weights(double at_s) {
  invalidate_every_namespace(UpdateKind::weights, InvalidationCause::weights, std::to_string(++model_generation_),
                             at_s);
}

void UpdateCampaign::swap_adapter(double at_s) {
  const std::string& adapter = schedule_.adapters[next_adapter_++ % schedule_.adapters.size()];
  invalidate_every_namespace(UpdateKind::adapter, InvalidationCause::adapter, adapter, at_s);
}

void UpdateCampaign::invalidate_every_namespace(UpdateKind kind, InvalidationCause cause,
                                                const std::string& successor_identity, double at_s) {
  for (const std::string& ns : namespaces_) {
    UpdateEvent e;
    e.kind = kind;
    e.namespace_name = ns;
    e.at_s = at_s;
    const Clock::time_point t0 = Clock::now();
    Result<NamespaceInvalidationReceipt> r =
        admin_->call(NamespaceInvalidateRequest{{}, ns, cause, successor_identity});
    e.call_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!r.ok()) e.error = r.error().describe();
    events_.push_back(std::move(e));
  }
}

void UpdateCampaign::purge_next_tenant(double at_s) {
  const std::string& ns = namespaces_[next_tenant_++ % namespaces_.size()];
  UpdateEvent e;
  e.kind = UpdateKind::purge;
  e.namespace_name = ns;
  e.at_s = at_s;
  const Clock::time_point t0 = Clock::now();
  Result<NamespacePurgeReceipt> r = admin_->call(NamespacePurgeRequest{
      {}, ns, InvalidationCause::weights, std::to_string(++model_generation_), schedule_.purge_deadline_ms, true});
  e.call_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (r.ok()) {
    e.purge_us = r->duration_us;
    e.receipts_drained = r->receipts_drained;
    e.receipts_revoked = r->receipts_revoked;
    e.blocks_marked_for_overwrite = r->blocks_marked_for_overwrite;
  } else {
    e.error = r.error().describe();
  }
  events_.push_back(std::move(e));
}

}  // namespace kvrt
