// The radix index owner's actor (issue 8 radix reuse). It answers the same
// PrefixBatch messages as the hash-chain index (the prefix_actor interface),
// so sessions, engines and receipts do not change. A publication is the
// three-phase cross-owner sequence RadixBlockService describes: read the
// request's table from the allocator owner, adopt its full pages, have the
// allocator lease every adopted block to the node, confirm, and release what
// the budget evicted. Each owner reply is awaited (CAF `await` suspends this
// mailbox), so no other message changes the tree between adopt and confirm.
#include <spdlog/spdlog.h>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codec_node.hpp"

namespace kvrt::actors {

namespace {

struct RadixActorState {
  static inline const char* name = "radix_index";
  std::shared_ptr<RadixBlockService> service;
  allocator_actor allocator;
  Observability obs;
};

using RadixSelf = prefix_actor::stateful_pointer<RadixActorState>;

struct RadixBatchRun {
  SessionId session;
  PrefixBatch batch;
  PrefixBatchReceipt receipt;
  caf::typed_response_promise<wire_bytes> promise;
  size_t next = 0;
};

void run_batch(RadixSelf self, std::shared_ptr<RadixBatchRun> run);

void release_leases(RadixSelf self, const std::vector<LeaseId>& leases) {
  if (leases.empty()) return;
  std::vector<uint64_t> ids;
  for (LeaseId l : leases) ids.push_back(l.value);
  self->send(self->state.allocator, unlease_atom::value, std::move(ids));
}

void publish_step(RadixSelf self, std::shared_ptr<RadixBatchRun> run, const PrefixPublishOp& op) {
  auto done = [self, run](PrefixOutcome outcome) {
    run->receipt.outcomes.push_back(std::move(outcome));
    ++run->next;
    run_batch(self, run);
  };
  self->request(self->state.allocator, caf::infinite, table_atom::value, run->session.value, op.request.value)
      .await(
          [self, run, op, done](BlockTableView& view) {
            if (view.groups.empty()) {
              done(make_error(ErrorCode::unknown_request,
                              "request " + std::to_string(op.request.value) +
                                  " has no block table this session may publish",
                              "request"));
              return;
            }
            auto decided = self->state.service->decide_publication(run->session, op, view);
            if (!decided.ok()) {
              done(decided.error());
              return;
            }
            auto publication = std::make_shared<RadixPublication>(std::move(decided).value());
            if (publication->lease_handles.empty()) {
              release_leases(self, self->state.service->confirm(*publication, {}));
              done(publication->receipt);
              return;
            }
            self->request(self->state.allocator, caf::infinite, lease_atom::value, publication->lease_handles)
                .await(
                    [self, publication, done](std::vector<uint64_t>& ids) {
                      std::vector<std::optional<LeaseId>> leases;
                      for (uint64_t id : ids) leases.push_back(id == 0 ? std::nullopt : std::optional(LeaseId{id}));
                      release_leases(self, self->state.service->confirm(*publication, leases));
                      done(publication->receipt);
                    },
                    [self, publication, done](caf::error& e) {
                      // No answer: nothing was recorded as leased; withdraw.
                      release_leases(self, self->state.service->confirm(*publication, {}));
                      done(make_error(ErrorCode::rpc_failed, "allocator leases: " + caf::to_string(e), "allocator"));
                    });
          },
          [done](caf::error& e) {
            done(make_error(ErrorCode::rpc_failed, "allocator table: " + caf::to_string(e), "allocator"));
          });
}

void run_batch(RadixSelf self, std::shared_ptr<RadixBatchRun> run) {
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

prefix_actor spawn_radix_prefix_actor(caf::actor_system& system, std::shared_ptr<RadixBlockService> service,
                                      allocator_actor allocator, Observability obs) {
  auto behavior = [](RadixSelf self, std::shared_ptr<RadixBlockService> svc, allocator_actor alloc,
                     Observability o) -> prefix_actor::behavior_type {
    self->state.service = std::move(svc);
    self->state.allocator = std::move(alloc);
    self->state.obs = std::move(o);
    return {
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "radix_index", "radix.batch", {});
          Result<PrefixBatch> batch = codec::decode<PrefixBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "radix_index", session, batch.error());
            return to_wire(codec::encode(codec::ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          auto run = std::make_shared<RadixBatchRun>();
          run->session = SessionId{session};
          run->receipt.trace = batch->trace;
          run->receipt.outcomes.reserve(batch->ops.size());
          run->batch = std::move(*batch);
          run->promise = self->make_response_promise<wire_bytes>();
          run_batch(self, run);
          return run->promise;
        },
        // The allocator never evicts a block the tree leases, so its events
        // name nothing the tree holds.
        [](events_atom, const std::vector<AllocatorEvent>&) {},
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
