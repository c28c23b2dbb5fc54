// The kernel executor owner's actor (issue 5): decodes an ExecuteBatch and
// answers each op in order: the request's table from the allocator owner,
// read under the calling session (another session's request answers
// not_owner there, before any kernel runs), then ExecutorService::decode over
// the node's pools. Malformed bytes answer an encoded typed Error and the
// actor keeps serving.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

namespace {

struct ExecutorActorState {
  static inline const char* name = "executor";
  std::shared_ptr<ExecutorService> service;
  allocator_actor allocator;
  Observability obs;
};

using ExecutorSelf = executor_actor::stateful_pointer<ExecutorActorState>;

struct ExecuteRun {
  SessionId session;
  ExecuteBatch batch;
  ExecuteBatchReceipt receipt;
  caf::typed_response_promise<wire_bytes> promise;
};

void run_ops(ExecutorSelf self, std::shared_ptr<ExecuteRun> run) {
  const size_t i = run->receipt.outcomes.size();
  if (i == run->batch.ops.size()) {
    log_answered(self->state.obs.log, "executor", run->session.value, run->batch.trace, run->receipt);
    run->promise.deliver(to_wire(codec::encode(run->receipt)));
    return;
  }
  const DecodeAttentionOp& op = run->batch.ops[i];
  self->request(self->state.allocator, caf::infinite, table_atom::value, run->session.value, op.request.value)
      .await(
          [self, run, i](BlockTableView& view) {
            const DecodeAttentionOp& op = run->batch.ops[i];
            if (view.groups.empty()) {
              run->receipt.outcomes.push_back(make_error(
                  ErrorCode::unknown_request,
                  "request " + std::to_string(op.request.value) + " has no block table this session may read",
                  "request"));
            } else {
              Result<AttentionOutput> out = self->state.service->decode(op, view);
              run->receipt.outcomes.push_back(out.ok() ? ExecuteOutcome(std::move(*out)) : ExecuteOutcome(out.error()));
            }
            run_ops(self, run);
          },
          [self, run](caf::error& e) {
            run->receipt.outcomes.push_back(
                make_error(ErrorCode::rpc_failed, "allocator table: " + caf::to_string(e), "allocator"));
            run_ops(self, run);
          });
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
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "executor", "executor.batch", {});
          Result<ExecuteBatch> batch = codec::decode<ExecuteBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "executor", session, batch.error());
            return to_wire(codec::encode(ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          auto run = std::make_shared<ExecuteRun>();
          run->session = SessionId{session};
          run->receipt.trace = batch->trace;
          run->receipt.outcomes.reserve(batch->ops.size());
          run->batch = std::move(*batch);
          run->promise = self->make_response_promise<wire_bytes>();
          run_ops(self, run);
          return run->promise;
        },
        [self](reuse_atom, TraceContext trace, const std::vector<ReuseSnapshotRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "executor", "reuse.snapshots", trace);
          std::vector<SnapshotAnswer> answers;
          answers.reserve(requests.size());
          for (const ReuseSnapshotRequest& r : requests) answers.push_back(self->state.service->freeze_reuse(r));
          return answers;
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
