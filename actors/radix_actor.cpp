// The radix index owner's actor (issue 8 radix reuse). It answers the same
// PrefixBatch messages as the hash-chain index (the prefix_actor interface),
// so sessions, engines and receipts do not change. A publication is the
// three-phase cross-owner sequence RadixBlockService describes: read the
// request's table from the allocator owner, adopt its full pages, have the
// allocator lease every adopted block to the node, confirm, and release what
// the budget evicted. Each owner reply is awaited (CAF `await` suspends this
// mailbox), so no other message changes the tree between adopt and confirm.
#include <spdlog/spdlog.h>

#include "actors/index_batch.hpp"

namespace kvrt::actors {

namespace {

struct RadixActorState {
  static inline const char* name = "radix_index";
  std::shared_ptr<RadixBlockService> service;
  allocator_actor allocator;
  Observability obs;
};

using RadixSelf = prefix_actor::stateful_pointer<RadixActorState>;

void run_batch(RadixSelf self, std::shared_ptr<IndexBatchRun> run);

void release_leases(RadixSelf self, const std::vector<LeaseId>& leases) {
  if (leases.empty()) return;
  std::vector<uint64_t> ids;
  for (LeaseId l : leases) ids.push_back(l.value);
  self->send(self->state.allocator, unlease_atom::value, std::move(ids));
}

void publish_step(RadixSelf self, std::shared_ptr<IndexBatchRun> run, const PrefixPublishOp& op) {
  auto done = [self, run](PrefixOutcome outcome) {
    run->answer(std::move(outcome));
    run_batch(self, run);
  };
  with_request_table(self, self->state.allocator, run, op, done, [self, run, op, done](BlockTableView& view) {
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
  });
}

void run_batch(RadixSelf self, std::shared_ptr<IndexBatchRun> run) {
  run_index_batch(
      *self->state.service, run,
      [self](const std::shared_ptr<IndexBatchRun>& r, const PrefixPublishOp& op) { publish_step(self, r, op); });
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
          return start_index_batch(self, session, bytes, self->state.obs, "radix_index", "radix.batch",
                                   [self](const std::shared_ptr<IndexBatchRun>& run) { run_batch(self, run); });
        },
        // The allocator never evicts a block the tree leases, so its events
        // name nothing the tree holds.
        [](events_atom, const std::vector<AllocatorEvent>&) {},
        // Requests are stuck behind the cache: give pages back, leaf first.
        [self](pressure_atom, uint32_t missing_blocks) {
          release_leases(self, self->state.service->relieve_pressure(missing_blocks));
        },
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<PrefixMatchOp>& lookups) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.lookups", trace);
          return reuse_candidates(*self->state.service, SessionId{session}, lookups);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReusePathLeaseRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.paths", trace);
          std::vector<ReusePathLeaseAnswer> answers;
          answers.reserve(requests.size());
          for (const ReusePathLeaseRequest& r : requests)
            answers.push_back(self->state.service->lease_path(SessionId{session}, r));
          return answers;
        },
        [self](version_atom, TraceContext trace) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.version", trace);
          return self->state.service->reuse_version();
        },
        [self](unlease_atom, uint64_t session, TraceContext trace, const std::vector<LeaseId>& leases) {
          TraceSlice slice(self->state.obs.trace, "radix_index", "reuse.release", trace);
          std::vector<uint8_t> released;
          released.reserve(leases.size());
          for (LeaseId l : leases) released.push_back(self->state.service->release_path(SessionId{session}, l) ? 1 : 0);
          return released;
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
