// The kernel executor owner's actor: the executor route, as an
// ExecuteBatchRun (services/executor/execute_batch_run.hpp) whose table
// reads go to the allocator owner, and step 8 of the reuse transaction.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "actors/run_driver.hpp"
#include "services/executor/execute_batch_run.hpp"

namespace kvrt::actors {

namespace {

struct ExecutorActorState {
  static inline const char* name = "executor";
  std::shared_ptr<ExecutorService> service;
  allocator_actor allocator;
  Observability obs;
};

using ExecutorSelf = executor_actor::stateful_pointer<ExecutorActorState>;

caf::result<wire_bytes> execute(ExecutorSelf self, SessionId session, const ExecuteBatch& batch) {
  auto promise = self->make_response_promise<wire_bytes>();
  auto run = std::make_shared<ExecuteBatchRun>(*self->state.service, batch);
  auto send = [self, session, run](const TableRead& read, auto resume) {
    on_answer<Waiting::awaiting>(
        self->request(self->state.allocator, caf::infinite, table_atom::value, session.value, read.request.value),
        [run, resume](BlockTableView& view) {
          run->answer(view.groups.empty() ? std::nullopt : std::optional(std::move(view)));
          resume();
        },
        [run, resume](caf::error& e) {
          run->failed(transport_error("allocator", e));
          resume();
        });
  };
  drive(run, send, [self, session, promise](const std::shared_ptr<ExecuteBatchRun>& r) mutable {
    ExecuteBatchReceipt receipt = r->take_receipt();
    log_answered(self->state.obs.log, "executor", session.value, receipt.trace, receipt);
    promise.deliver(to_wire(codec::encode(receipt)));
  });
  return promise;
}

}  // namespace

executor_actor spawn_executor_actor(caf::actor_system& system, std::shared_ptr<ExecutorService> service,
                                    allocator_actor allocator, Observability obs) {
  auto behavior = [](ExecutorSelf self, std::shared_ptr<ExecutorService> svc, allocator_actor alloc,
                     Observability o) -> executor_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          return serve_owner_routes<Owner::executor>(
              self->state.obs, route, session, bytes,
              [&](const ExecuteBatch& batch) { return execute(self, SessionId{session}, batch); });
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [](end_atom, uint64_t) {},  // the executor holds nothing of a session
        [self](reuse_atom, TraceContext trace, const std::vector<ReuseSnapshotRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "executor", "reuse.snapshots", trace);
          std::vector<SnapshotAnswer> answers;
          answers.reserve(requests.size());
          for (const ReuseSnapshotRequest& r : requests) answers.push_back(self->state.service->freeze_reuse(r));
          return answers;
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
