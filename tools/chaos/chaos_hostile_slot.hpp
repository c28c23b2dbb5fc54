#pragma once
// The campaign's live-node fuzzer (hostile_client faults): one session at a
// time beside the honest workers, on a thread of its own for hostile_ms
// (tools/chaos/hostile_client.hpp). Every request must get its receipt or a
// typed error; anything else is a violation.
#include <future>

#include "services/session/node_descriptor.hpp"
#include "tools/chaos/chaos_record.hpp"
#include "tools/chaos/hostile_client.hpp"

namespace kvrt::chaos {

class HostileSlot {
 public:
  HostileSlot(const ChaosConfig& config, CampaignRecord& record) : c_(config), record_(record) {}

  // Starts a run against `node`; a fault due while one runs is skipped.
  // Errors: config_field when the node has no token for the hostile principal.
  Status start(const FaultEvent& e, const NodeDescriptor& node);
  // Adds a finished run to the report; `wait`: until the running one finishes.
  void collect(bool wait);

 private:
  const ChaosConfig& c_;
  CampaignRecord& record_;
  std::future<Result<HostileClientSummary>> running_;
};

}  // namespace kvrt::chaos
