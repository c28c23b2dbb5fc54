#pragma once
// The campaign's admin session (docs/architecture.md, "Fault points of an
// owner"): the capability a worker principal never has. It learns which
// fault points the node registers, arms one per fault_point event, reads
// what fired before the node goes (its counters go with it), and updates a
// namespace per namespace_update event (a weights invalidation, or a purge,
// 0x01A, 0x0CE). The campaign turns its answers into report counts and
// violations; this class only speaks to the node.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/client.hpp"
#include "services/session/node_descriptor.hpp"
#include "tools/chaos/chaos_config.hpp"

namespace kvrt::chaos {

class ChaosAdminSession {
 public:
  // Connects as the config's admin principal when the campaign arms fault
  // points or updates namespaces; nullopt, and no error, when it does
  // neither. Errors: config_field (no admin principal's token), the
  // connection's.
  static Result<std::optional<ChaosAdminSession>> connect(const ChaosConfig& config, const NodeDescriptor& node);

  // Every point the node registers, as "<owner>.<point>".
  const std::vector<std::string>& registered() const { return registered_; }
  // How often each point has fired on this node.
  Result<std::vector<FaultPointFired>> fired();
  // Arms the event's point (registered()[slot mod count]) for its next,
  // second or third reach; answers the name armed, nullopt when the node
  // registers none.
  Result<std::optional<std::string>> arm(const FaultEvent& event);

  struct NamespaceUpdate {
    std::string namespace_name;
    bool purge = false;
    bool resumed = false;  // the purge resumed one a fault point had left open
    // Refused for a reason the node's own state explains (a purge fault
    // point fired, or an invalidation met a purge left open): counted, not
    // a violation.
    bool refused = false;
  };
  // The event's namespace (of the node's, slot mod count; bit 16 of the
  // slot: purge with overwrite and a 50 ms deadline, else invalidate the
  // weights); nullopt when the node has no namespace. An error is a
  // violation: the update failed for a reason the campaign did not cause.
  Result<std::optional<NamespaceUpdate>> update_namespace(const FaultEvent& event);

 private:
  ChaosAdminSession(std::unique_ptr<Client> client, std::vector<std::string> registered)
      : client_(std::move(client)), registered_(std::move(registered)) {}

  std::unique_ptr<Client> client_;
  std::vector<std::string> registered_;
};

}  // namespace kvrt::chaos
