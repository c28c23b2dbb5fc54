#include "tools/chaos/chaos_hostile_slot.hpp"

#include "services/common/splitmix64.hpp"

namespace kvrt::chaos {

Status HostileSlot::start(const FaultEvent& e, const NodeDescriptor& node) {
  const size_t k = static_cast<size_t>(e.kind);
  if (running_.valid()) {
    ++record_.report.skipped[k];
    return Status::success();
  }
  Result<std::string> token = read_token_file(node.token_path(c_.hostile_principal));
  if (!token.ok())
    return make_error(ErrorCode::config_field,
                      "hostile_client faults need a worker principal \"" + c_.hostile_principal + "\" in " +
                          c_.node_config_path + ": " + token.error().reason,
                      "hostile_principal");
  HostileClientOptions o;
  o.node = node;
  o.token_hex = *token;
  o.name = c_.hostile_principal;
  o.seed = splitmix64(c_.seed ^ e.slot ^ (e.at_ms << 20));
  o.duration = std::chrono::milliseconds(c_.hostile_ms);
  o.call_timeout = std::chrono::milliseconds(c_.settle_timeout_ms);
  running_ = std::async(std::launch::async, [o] { return run_hostile_client(o); });
  ++record_.report.injected[k];
  return Status::success();
}

void HostileSlot::collect(bool wait) {
  if (!running_.valid()) return;
  if (!wait && running_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  const Result<HostileClientSummary> r = running_.get();
  if (!r.ok()) {
    // It could not connect: the node was being killed or restarted. Typed
    // and counted; anything else is a violation.
    const ErrorCode c = r.error().code;
    if (c == ErrorCode::node_unreachable || c == ErrorCode::node_lost || c == ErrorCode::session_ended)
      ++record_.report.hostile.could_not_connect;
    else
      record_.violation("the hostile client failed: " + r.error().describe());
    return;
  }
  ChaosReport::HostileTotals& h = record_.report.hostile;
  ++h.runs;
  h.requests += r->requests_channel + r->requests_middleman;
  h.requests_channel += r->requests_channel;
  h.mutated += r->mutated;
  h.receipts += r->receipts;
  h.typed_errors += r->typed_errors;
  h.frames_refused += r->frames_refused;
  h.unexpected += r->unexpected;
  if (r->unexpected > 0)
    record_.violation("the hostile client got " + std::to_string(r->unexpected) +
                      " answers that were neither a receipt nor a typed error; the first: " + r->first_unexpected);
}

}  // namespace kvrt::chaos
