// The prefix-index owner's actor. Lookups are answered in one call on the
// PrefixService. A publication is the two-phase cross-owner sequence the
// service describes: read the request's table from the allocator owner,
// decide the entries, have the allocator apply the weak-identity tags,
// withdraw any it refused. The batch's operations stay in order: the actor
// awaits each owner reply (CAF `await` suspends this mailbox, so no other
// message mutates the index between deciding and confirming).
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codec_node.hpp"

namespace kvrt::actors {

namespace {

struct PrefixActorState {
  static inline const char* name = "prefix_index";
  std::shared_ptr<PrefixService> service;
  allocator_actor allocator;
  Observability obs;
};

using PrefixSelf = prefix_actor::stateful_pointer<PrefixActorState>;

// One batch being answered, possibly across owner round trips.
struct PrefixBatchRun {
  SessionId session;
  PrefixBatch batch;
  PrefixBatchReceipt receipt;
  caf::typed_response_promise<wire_bytes> promise;
  size_t next = 0;
};

void run_batch(PrefixSelf self, std::shared_ptr<PrefixBatchRun> run);

void publish_step(PrefixSelf self, std::shared_ptr<PrefixBatchRun> run, const PrefixPublishOp& op) {
  auto& st = self->state;
  auto done = [self, run](PrefixOutcome outcome) {
    run->receipt.outcomes.push_back(std::move(outcome));
    ++run->next;
    run_batch(self, run);
  };
  self->request(st.allocator, caf::infinite, table_atom::value, run->session.value, op.request.value)
      .await(
          [self, run, op, done](BlockTableView& view) {
            auto& svc = *self->state.service;
            if (view.groups.empty()) {
              done(make_error(ErrorCode::unknown_request,
                              "request " + std::to_string(op.request.value) +
                                  " has no block table this session may publish",
                              "request"));
              return;
            }
            Result<DecidedPublication> decided = svc.decide_publication(run->session, op, view);
            if (!decided.ok()) {
              done(decided.error());
              return;
            }
            if (decided->tags.empty()) {
              done(decided->receipt);
              return;
            }
            auto tags = decided->tags;
            auto receipt = decided->receipt;
            self->request(self->state.allocator, caf::infinite, tags_atom::value, tags)
                .await(
                    [self, tags, receipt, done](std::vector<uint8_t>& accepted) mutable {
                      std::vector<Status> results(tags.size());
                      for (size_t i = 0; i < tags.size(); ++i)
                        if (i >= accepted.size() || accepted[i] == 0)
                          results[i] = make_error(ErrorCode::unknown_physical, "the allocator refused the tag");
                      const uint32_t refused = self->state.service->confirm_tags(tags, results);
                      receipt.published -= refused;
                      done(receipt);
                    },
                    [done](caf::error& e) {
                      done(make_error(ErrorCode::rpc_failed, "allocator tags: " + caf::to_string(e), "allocator"));
                    });
          },
          [done](caf::error& e) {
            done(make_error(ErrorCode::rpc_failed, "allocator table: " + caf::to_string(e), "allocator"));
          });
}

void run_batch(PrefixSelf self, std::shared_ptr<PrefixBatchRun> run) {
  auto& svc = *self->state.service;
  while (run->next < run->batch.ops.size()) {
    const PrefixOp& op = run->batch.ops[run->next];
    if (const auto* m = std::get_if<PrefixMatchOp>(&op)) {
      Result<PrefixMatchReceipt> r = svc.match(run->session, *m);
      run->receipt.outcomes.push_back(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
      ++run->next;
      continue;
    }
    const auto& pub = std::get<PrefixPublishOp>(op);
    if (Status st = svc.check_publication(run->session, pub); !st.ok()) {
      run->receipt.outcomes.push_back(st.error());
      ++run->next;
      continue;
    }
    publish_step(self, run, pub);
    return;  // continues in the allocator's reply
  }
  run->promise.deliver(to_wire(codec::encode(run->receipt)));
}

}  // namespace

prefix_actor spawn_prefix_actor(caf::actor_system& system, std::shared_ptr<PrefixService> service,
                                allocator_actor allocator, Observability obs) {
  auto behavior = [](PrefixSelf self, std::shared_ptr<PrefixService> svc, allocator_actor alloc,
                     Observability o) -> prefix_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    return {
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "prefix_index", "prefix.batch", {});
          Result<PrefixBatch> batch = codec::decode<PrefixBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "prefix_index", session, batch.error());
            return to_wire(codec::encode(codec::ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          if (st.obs.trace) st.obs.trace->flow_finish("prefix_index", ChromeTraceRecorder::now_us(), flow_id(batch->trace));
          auto run = std::make_shared<PrefixBatchRun>();
          run->session = SessionId{session};
          run->receipt.trace = batch->trace;
          run->receipt.outcomes.reserve(batch->ops.size());
          run->batch = std::move(*batch);
          run->promise = self->make_response_promise<wire_bytes>();
          run_batch(self, run);
          return run->promise;
        },
        [self](events_atom, const std::vector<AllocatorEvent>& events) { self->state.service->absorb(events); },
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
