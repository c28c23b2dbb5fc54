// The prefix-index owner's actor. Lookups are answered in one call on the
// PrefixService. A publication is the two-phase cross-owner sequence the
// service describes: read the request's table from the allocator owner,
// decide the entries, have the allocator apply the weak-identity tags,
// withdraw any it refused. The batch's operations stay in order: the actor
// awaits each owner reply (CAF `await` suspends this mailbox, so no other
// message mutates the index between deciding and confirming).
#include <spdlog/spdlog.h>

#include "actors/index_batch.hpp"

namespace kvrt::actors {

namespace {

struct PrefixActorState {
  static inline const char* name = "prefix_index";
  std::shared_ptr<PrefixService> service;
  allocator_actor allocator;
  Observability obs;
};

using PrefixSelf = prefix_actor::stateful_pointer<PrefixActorState>;

void run_batch(PrefixSelf self, std::shared_ptr<IndexBatchRun> run);

void publish_step(PrefixSelf self, std::shared_ptr<IndexBatchRun> run, const PrefixPublishOp& op) {
  auto& st = self->state;
  auto done = [self, run](PrefixOutcome outcome) {
    run->answer(std::move(outcome));
    run_batch(self, run);
  };
  with_request_table(self, st.allocator, run, op, done, [self, run, op, done](BlockTableView& view) {
    auto& svc = *self->state.service;
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
  });
}

void run_batch(PrefixSelf self, std::shared_ptr<IndexBatchRun> run) {
  run_index_batch(
      *self->state.service, run,
      [self](const std::shared_ptr<IndexBatchRun>& r, const PrefixPublishOp& op) { publish_step(self, r, op); });
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
          return start_index_batch(self, session, bytes, self->state.obs, "prefix_index", "prefix.batch",
                                   [self](const std::shared_ptr<IndexBatchRun>& run) { run_batch(self, run); });
        },
        [self](events_atom, const std::vector<AllocatorEvent>& events) { self->state.service->absorb(events); },
        // The hash chain holds no block: the allocator's own LRU evicts its
        // cached blocks on demand.
        [](pressure_atom, uint32_t) {},
        [self](grant_atom, uint64_t session, const SessionNamespaceGrant& grant) {
          self->state.service->grant(SessionId{session}, grant);
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(self->state.service->stats())); },
        [self](end_atom, uint64_t session) { self->state.service->end_session(SessionId{session}); },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<PrefixMatchOp>& lookups) {
          TraceSlice slice(self->state.obs.trace, "prefix_index", "reuse.lookups", trace);
          return reuse_candidates(*self->state.service, SessionId{session}, lookups);
        },
        [self](version_atom, TraceContext trace) {
          TraceSlice slice(self->state.obs.trace, "prefix_index", "reuse.version", trace);
          return self->state.service->reuse_version();
        },
        // Hash-chain candidates name no path: nothing to lock or unlock.
        [](reuse_atom, uint64_t, TraceContext, const std::vector<ReusePathLeaseRequest>& requests) {
          return std::vector<ReusePathLeaseAnswer>(
              requests.size(), ReusePathLeaseAnswer{std::nullopt, "the hash-chain index holds no paths"});
        },
        [](unlease_atom, uint64_t, TraceContext, const std::vector<LeaseId>& leases) {
          return std::vector<uint8_t>(leases.size(), 0);
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(allocator), std::move(obs));
}

}  // namespace kvrt::actors
