#pragma once
// The updates of a `kvrt run` pass ([updates] of the run config): weights
// updates, adapter swaps and tenant purges on the live node while the workers
// keep serving. One thread of the driver holds an admin session (the
// invalidate and purge routes refuse worker sessions) and fires the
// schedule: each weights update moves every namespace to the next model
// generation of the node (invalidate, cause weights, 0x01A); each adapter
// swap makes the next adapter of the list active in every namespace
// (invalidate, cause adapter); each purge runs the seven steps of 0x0CE on
// the next tenant namespace in turn, its successor on the next model
// generation, with overwrite. The workers learn of each change from their
// next refused op and grant, and compute every request with the weights of
// the generation it was admitted under (engine/model/model_variants.hpp).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "schema/authorization_types.hpp"
#include "services/common/result.hpp"
#include "services/session/node_descriptor.hpp"
#include "tools/run/run_config.hpp"

namespace kvrt {

class Client;

enum class UpdateKind { weights, adapter, purge };
const char* to_string(UpdateKind kind);

// One admin call of the campaign.
struct UpdateEvent {
  UpdateKind kind = UpdateKind::weights;
  std::string namespace_name;
  double at_s = 0;                           // when it was sent, from the campaign's start [s]
  double call_us = 0;                        // request to receipt, as the driver saw it [us]
  uint64_t purge_us = 0;                     // a purge's begin to completion, from its receipt [us]
  uint64_t receipts_drained = 0;             // a purge's: g's receipts released within the deadline
  uint64_t receipts_revoked = 0;             // a purge's: revoked at the deadline
  uint64_t blocks_marked_for_overwrite = 0;  // a purge's: blocks to be zeroed before their next owner
  std::string error;                         // empty: the node carried it out
};

class UpdateCampaign {
 public:
  // Connects the admin session (the schedule's admin_principal, whose token
  // the node wrote beside its descriptor) and starts the thread. The
  // namespaces are the workload's tenants; base_model_generation is the
  // layout's. Errors: a missing token file, a refused session.
  static Result<std::unique_ptr<UpdateCampaign>> start(const NodeDescriptor& node, const UpdateSchedule& schedule,
                                                       std::vector<std::string> namespaces,
                                                       uint64_t base_model_generation);
  ~UpdateCampaign();
  // Stops the thread (an admin call in flight finishes first) and returns
  // every event, in the order sent.
  std::vector<UpdateEvent> stop();

 private:
  UpdateCampaign(std::unique_ptr<Client> admin, UpdateSchedule schedule, std::vector<std::string> namespaces,
                 uint64_t base_model_generation);
  void run();
  void update_weights(double at_s);
  void swap_adapter(double at_s);
  // One invalidation per namespace, each recorded as an event of `kind`.
  void invalidate_every_namespace(UpdateKind kind, InvalidationCause cause, const std::string& successor_identity,
                                  double at_s);
  void purge_next_tenant(double at_s);

  std::unique_ptr<Client> admin_;
  UpdateSchedule schedule_;
  std::vector<std::string> namespaces_;
  uint64_t model_generation_;  // the node's latest model generation, every namespace at or below it
  size_t next_adapter_ = 0, next_tenant_ = 0;
  std::vector<UpdateEvent> events_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvrt
