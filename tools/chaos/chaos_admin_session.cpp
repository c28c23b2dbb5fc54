#include "tools/chaos/chaos_admin_session.hpp"

namespace kvrt::chaos {

Result<std::optional<ChaosAdminSession>> ChaosAdminSession::connect(const ChaosConfig& c, const NodeDescriptor& node) {
  if (c.per_minute[static_cast<size_t>(FaultKind::fault_point)] == 0 &&
      c.per_minute[static_cast<size_t>(FaultKind::namespace_update)] == 0)
    return std::optional<ChaosAdminSession>{};
  Result<std::string> token = read_token_file(node.token_path(c.admin_principal));
  if (!token.ok())
    return make_error(ErrorCode::config_field,
                      "fault_point faults need an admin principal \"" + c.admin_principal + "\" in " +
                          c.node_config_path + " ([[principal]] role = \"admin\"): " + token.error().reason,
                      "admin_principal");
  ClientOptions o;
  o.worker_name = c.admin_principal;
  o.timeout = std::chrono::milliseconds(c.settle_timeout_ms);
  Result<std::unique_ptr<Client>> client = Client::connect(node, *token, o);
  if (!client.ok()) return client.error();
  // What the node registers; armed points start from none.
  Result<FaultArmReceipt> known = (*client)->call(FaultArmRequest{{}, true, {}});
  if (!known.ok()) return known.error();
  return std::optional<ChaosAdminSession>{ChaosAdminSession(std::move(*client), std::move(known->registered))};
}

Result<std::vector<FaultPointFired>> ChaosAdminSession::fired() {
  Result<FaultArmReceipt> now = client_->call(FaultArmRequest{{}, true, {}});
  if (!now.ok()) return now.error();
  return std::move(now->fired);
}

Result<std::optional<std::string>> ChaosAdminSession::arm(const FaultEvent& e) {
  if (registered_.empty()) return std::optional<std::string>{};
  const std::string& name = registered_[e.slot % registered_.size()];
  const uint32_t nth = 1 + e.slot % 3;  // the next, second or third reach
  Result<FaultArmReceipt> armed = client_->call(FaultArmRequest{{}, false, {{name, nth}}});
  if (!armed.ok()) return armed.error();
  return std::optional<std::string>{name};
}

Result<std::optional<ChaosAdminSession::NamespaceUpdate>> ChaosAdminSession::update_namespace(const FaultEvent& e) {
  Result<NamespaceStatusReceipt> status = client_->call(NamespaceStatusRequest{{}, ""});
  if (!status.ok())
    return make_error(status.error().code, "the node's namespaces could not be read: " + status.error().describe(),
                      "namespace_status");
  if (status->namespaces.empty()) return std::optional<NamespaceUpdate>{};
  NamespaceUpdate u;
  u.namespace_name = status->namespaces[e.slot % status->namespaces.size()].namespace_name;
  u.purge = (e.slot >> 16) & 1;
  Status done = Status::success();
  if (u.purge) {
    Result<NamespacePurgeReceipt> r =
        client_->call(NamespacePurgeRequest{{}, u.namespace_name, InvalidationCause::weights, "", 50, true});
    if (r.ok())
      u.resumed = !r->resumed_after.empty();
    else
      done = r.error();
  } else {
    Result<NamespaceInvalidationReceipt> r =
        client_->call(NamespaceInvalidateRequest{{}, u.namespace_name, InvalidationCause::weights, ""});
    if (!r.ok()) done = r.error();
  }
  if (!done.ok()) {
    const ErrorCode code = done.error().code;
    if (code != ErrorCode::fault_injected && code != ErrorCode::authorization_purge_pending)
      return make_error(code,
                        std::string(u.purge ? "purge" : "invalidation") + " of " + u.namespace_name +
                            " failed: " + done.error().describe(),
                        done.error().field);
    u.refused = true;
  }
  return std::optional<NamespaceUpdate>{std::move(u)};
}

}  // namespace kvrt::chaos
