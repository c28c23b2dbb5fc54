// The executable-reuse coordinator (spec 0x0CD; issue 5): one actor per node.
// A worker's ReuseBatch arrives through its session actor; this actor runs
// the batch's ops through steps 1-8 as one message per owner per step
// (services/reuse/reuse_batch_run.hpp has the sequence), releases the leases
// of every attempt that ended without a receipt, counts each attempt in the
// node's transaction funnel (0x0CF) and answers one receipt. It uses `then`,
// not `await`: other batches proceed while one waits for an owner, which is
// why every step re-checks what an earlier one read (leases, versions).
#include <spdlog/spdlog.h>

#include <array>
#include <map>
#include <set>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"
#include "services/reuse/reuse_batch_run.hpp"

namespace kvrt::actors {

namespace {

struct ReuseActorState {
  static inline const char* name = "reuse";
  OwnerHandles owners;
  ReuseNodeFacts facts;
  Observability obs;
  ReuseFunnel funnel;  // every attempt that ended in a receipt or a rejection
  // Attempts refused at steps 1-2, by reason: they never reached an index,
  // so the index owners' lookup counters do not see them (0x0CE).
  std::array<uint64_t, kRejectionReasonCount> refused_before_lookup{};
  std::map<uint64_t, uint32_t> in_flight;  // session -> batches being sequenced
  std::set<uint64_t> ended;                // sessions that ended with a batch in flight
  OpenReuseAttempts open;                  // receipts handed out, awaiting their release op
  uint64_t batches = 0, ops = 0, receipts = 0, rejections = 0, errors = 0, leases_released = 0;
  uint64_t successors_published = 0, successors_refused = 0;  // step 10's second ending
};

using ReuseSelf = reuse_actor::stateful_pointer<ReuseActorState>;

struct ReuseRun {
  SessionId session;
  ReuseBatchRun core;
  caf::typed_response_promise<wire_bytes> promise;
};
using RunPtr = std::shared_ptr<ReuseRun>;

Error transport_error(const char* owner, const caf::error& e) {
  return make_error(ErrorCode::rpc_failed, std::string(owner) + ": " + caf::to_string(e), owner);
}

// Hands leases back to their owners. Requested before the receipt is
// delivered, so each owner handles it before anything the worker sends after
// reading the receipt (in-process enqueue is immediate and ordered).
void return_leases(ReuseSelf self, SessionId session, TraceContext trace, const ReuseBatchRun::LeaseReturn& leases) {
  auto& st = self->state;
  auto ignore = [](std::vector<uint8_t>&) {};
  auto log_failure = [self, session, trace](caf::error& e) {
    logger_or_default(self->state.obs.log)
        .warn("actor=reuse session={} trace={:016x} could not return leases: {}", session.value, trace.trace_id,
              caf::to_string(e));
  };
  if (!leases.blocks.empty())
    self->request(st.owners.allocator, caf::infinite, unlease_atom::value, session.value, trace, leases.blocks)
        .then(ignore, log_failure);
  if (!leases.paths.empty())
    self->request(st.owners.prefix, caf::infinite, unlease_atom::value, session.value, trace, leases.paths)
        .then(ignore, log_failure);
  st.leases_released += leases.blocks.size() + leases.paths.size();
}

void finish(ReuseSelf self, const RunPtr& run) {
  auto& st = self->state;
  const uint64_t s = run->session.value;
  // Every answer this run had came after the end, if the end came at all
  // (the gateway tells this actor first): leases some owner granted after
  // its own end_session would never be reclaimed, so all of them go back.
  const bool ended = st.ended.contains(s);
  const ReuseBatchRun::LeaseReturn release = ended ? run->core.all_leases() : run->core.leases_to_release();
  if (!release.empty()) return_leases(self, run->session, run->core.trace(), release);
  // The receipts' attempts wait for their release op (steps 9-10); a
  // session that ended will send none, and its leases went back above.
  for (ReuseAttempt& a : run->core.take_receipt_attempts()) {
    if (ended) continue;
    if (Status held = st.open.hold(run->session, std::move(a)); !held.ok())
      logger_or_default(st.obs.log)
          .error("actor=reuse session={} trace={:016x} could not hold an attempt open: {}", s,
                 run->core.trace().trace_id, held.error().describe());
  }
  if (--st.in_flight[s] == 0) {
    st.in_flight.erase(s);
    st.ended.erase(s);
  }
  ReuseBatchReceipt receipt = run->core.receipt();
  for (const ReuseOutcome& o : receipt.outcomes) {
    if (std::holds_alternative<ExecutableReuseReceipt>(o))
      ++st.receipts;
    else if (const auto* r = std::get_if<ReuseRejectionReceipt>(&o)) {
      ++st.rejections;
      if (r->step <= ReuseStep::build_key) ++st.refused_before_lookup[static_cast<size_t>(r->reason)];
    } else if (std::holds_alternative<Error>(o))
      ++st.errors;
    else if (const auto* rel = std::get_if<ReuseReleaseReceipt>(&o)) {
      if (rel->published_successor) ++st.successors_published;
      if (rel->successor_refused) ++st.successors_refused;
    }
  }
  for (const FunnelOutcome& f : run->core.funnel_outcomes()) st.funnel.record(f);
  log_answered(st.obs.log, "reuse", s, run->core.trace(), receipt);
  run->promise.deliver(to_wire(codec::encode(receipt)));
}

void snapshots(ReuseSelf self, const RunPtr& run) {
  std::vector<ReuseSnapshotRequest> reqs = run->core.snapshot_requests();
  if (reqs.empty()) return finish(self, run);
  self->request(self->state.owners.executor, caf::infinite, reuse_atom::value, run->core.trace(), std::move(reqs))
      .then(
          [self, run](std::vector<SnapshotAnswer>& answers) {
            run->core.on_snapshots(answers);
            finish(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("executor", e));
            finish(self, run);
          });
}

void versions(ReuseSelf self, const RunPtr& run) {
  if (run->core.version_requests() == 0) return snapshots(self, run);
  // Read after the allocator answered, so after the leases were taken.
  self->request(self->state.owners.prefix, caf::infinite, version_atom::value, run->core.trace())
      .then(
          [self, run](ReuseIndexVersion& v) {
            run->core.on_index_version(v);
            snapshots(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("prefix_index", e));
            snapshots(self, run);
          });
}

void paths(ReuseSelf self, const RunPtr& run) {
  std::vector<ReusePathLeaseRequest> reqs = run->core.path_lease_requests();
  if (reqs.empty()) return versions(self, run);
  self->request(self->state.owners.prefix, caf::infinite, reuse_atom::value, run->session.value, run->core.trace(),
                std::move(reqs))
      .then(
          [self, run](std::vector<ReusePathLeaseAnswer>& answers) {
            run->core.on_path_leases(answers);
            versions(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("prefix_index", e));
            versions(self, run);
          });
}

void leases(ReuseSelf self, const RunPtr& run) {
  std::vector<ReuseLeaseRequest> reqs = run->core.lease_requests();
  if (reqs.empty()) return paths(self, run);
  self->request(self->state.owners.allocator, caf::infinite, reuse_atom::value, run->session.value, run->core.trace(),
                std::move(reqs))
      .then(
          [self, run](std::vector<ReuseLeaseAnswer>& answers) {
            run->core.on_leases(answers);
            paths(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("allocator", e));
            paths(self, run);
          });
}

void lookups(ReuseSelf self, const RunPtr& run) {
  std::vector<PrefixMatchOp> reqs = run->core.candidate_requests();
  if (reqs.empty()) return leases(self, run);
  self->request(self->state.owners.prefix, caf::infinite, reuse_atom::value, run->session.value, run->core.trace(),
                std::move(reqs))
      .then(
          [self, run](std::vector<CandidateReply>& answers) {
            run->core.on_candidates(answers);
            leases(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("prefix_index", e));
            leases(self, run);
          });
}

void keys(ReuseSelf self, const RunPtr& run) {
  std::vector<ReuseKeyRequest> reqs = run->core.key_requests();
  if (reqs.empty()) return lookups(self, run);
  self->request(self->state.owners.authorization, caf::infinite, reuse_atom::value, run->session.value,
                run->core.trace(), std::move(reqs))
      .then(
          [self, run](std::vector<ReuseKeyAnswer>& answers) {
            run->core.on_keys(answers);
            lookups(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_stage_failed(transport_error("authorization", e));
            lookups(self, run);
          });
}

// Step 10 for the batch's release ops: every lease to its owner, both
// owners asked at once; the keys stage starts when both answered.
void releases(ReuseSelf self, const RunPtr& run) {
  const ReuseBatchRun::LeaseReturn reqs = run->core.release_requests();
  if (reqs.empty()) {
    run->core.on_released({}, {});
    return keys(self, run);
  }
  auto& st = self->state;
  struct Pending {
    std::vector<uint8_t> blocks, paths;
    int remaining = 0;
    std::optional<Error> failed;
  };
  auto pending = std::make_shared<Pending>();
  pending->remaining = (reqs.blocks.empty() ? 0 : 1) + (reqs.paths.empty() ? 0 : 1);
  st.leases_released += reqs.blocks.size() + reqs.paths.size();
  auto done = [self, run, pending]() {
    if (--pending->remaining > 0) return;
    if (pending->failed)
      run->core.on_stage_failed(*pending->failed);
    else
      run->core.on_released(pending->blocks, pending->paths);
    keys(self, run);
  };
  auto ask = [&](auto owner, const char* name, const std::vector<LeaseId>& leases,
                 std::vector<uint8_t> Pending::*into) {
    self->request(owner, caf::infinite, unlease_atom::value, run->session.value, run->core.trace(), leases)
        .then(
            [pending, done, into](std::vector<uint8_t>& flags) mutable { (*pending).*into = std::move(flags), done(); },
            [pending, done, name](caf::error& e) mutable { pending->failed = transport_error(name, e), done(); });
  };
  if (!reqs.blocks.empty()) ask(st.owners.allocator, "allocator", reqs.blocks, &Pending::blocks);
  if (!reqs.paths.empty()) ask(st.owners.prefix, "prefix_index", reqs.paths, &Pending::paths);
}

// Step 10's successors, before their attempts' leases go back: one
// PrefixBatch of publish ops to the index owner under the session, the same
// message a worker's publication is (so the same ownership, grant and
// committed-rows checks). A transport failure or an undecodable answer
// refuses every successor of the batch; their leases still go back.
void successors(ReuseSelf self, const RunPtr& run) {
  std::vector<PrefixOp> ops = run->core.successor_requests();
  if (ops.empty()) return releases(self, run);
  PrefixBatch batch{run->core.trace(), std::move(ops)};
  self->request(self->state.owners.prefix, caf::infinite, batch_atom::value, run->session.value,
                to_wire(codec::encode(batch)))
      .then(
          [self, run](wire_bytes& reply) {
            Result<PrefixBatchReceipt> published = codec::decode<PrefixBatchReceipt>(as_span(reply));
            if (!published.ok()) {
              // The owner refused the whole batch (it answers an ErrorMessage then).
              Result<ErrorMessage> refused = codec::decode<ErrorMessage>(as_span(reply));
              if (refused.ok()) published = refused->error;
            }
            run->core.on_successors(published);
            releases(self, run);
          },
          [self, run](caf::error& e) {
            run->core.on_successors(transport_error("prefix_index", e));
            releases(self, run);
          });
}

OwnerStats reuse_stats(const ReuseActorState& st) {
  OwnerStats out;
  out.owner = "reuse";
  const Status v = st.open.validate();
  out.validate_ok = v.ok();
  if (!v.ok()) out.validate_error = v.error().describe();
  auto put = [&](std::string name, uint64_t v) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(v)});
  };
  put("batches", st.batches);
  put("attempts", st.ops);
  put("receipts", st.receipts);
  put("rejections", st.rejections);
  put("errors", st.errors);
  put("leases_released", st.leases_released);
  put("open_attempts", st.open.size());
  put("successors_published", st.successors_published);
  put("successors_refused", st.successors_refused);
  // As "reuse_refused_<reason>" in the node's stats: node_reuse_funnel()
  // counts them as requests refused for authorization.
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (bucket_of(static_cast<RejectionReason>(r)) == ReuseBucket::authorization)
      put("refused_" + std::string(to_string(static_cast<RejectionReason>(r))), st.refused_before_lookup[r]);
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    put(std::string("rejected_") + std::string(to_string(static_cast<ReuseBucket>(b))),
        st.funnel.rejections(static_cast<ReuseBucket>(b)));
  return out;
}

}  // namespace

reuse_actor spawn_reuse_actor(caf::actor_system& system, OwnerHandles owners, ReuseNodeFacts facts, Observability obs) {
  auto behavior = [](ReuseSelf self, OwnerHandles o, ReuseNodeFacts f, Observability ob) -> reuse_actor::behavior_type {
    self->state.owners = std::move(o);
    self->state.facts = std::move(f);
    self->state.obs = std::move(ob);
    return {
        [self](batch_atom, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          TraceSlice slice(st.obs.trace, "reuse", "reuse.batch", {});
          Result<ReuseBatch> batch = codec::decode<ReuseBatch>(as_span(bytes));
          if (!batch.ok()) {
            log_rejected(st.obs.log, "reuse", session, batch.error());
            return to_wire(codec::encode(ErrorMessage{batch.error()}));
          }
          slice.set_trace(batch->trace);
          if (st.obs.trace) st.obs.trace->flow_finish("reuse", ChromeTraceRecorder::now_us(), flow_id(batch->trace));
          ++st.batches;
          ++st.in_flight[session];
          st.ops += batch->ops.size();
          auto run = std::make_shared<ReuseRun>(
              ReuseRun{SessionId{session},
                       ReuseBatchRun(std::move(*batch), st.facts.pools, st.facts.block_tokens, st.facts.cache_groups),
                       self->make_response_promise<wire_bytes>()});
          run->core.bind(st.open, SessionId{session});
          successors(self, run);
          return run->promise;
        },
        [self](stats_atom) -> wire_bytes { return to_wire(codec::encode(reuse_stats(self->state))); },
        [self](end_atom, uint64_t session) {
          // The owners reclaim the leases of its open attempts themselves.
          self->state.open.end_session(SessionId{session});
          if (self->state.in_flight.contains(session)) self->state.ended.insert(session);
        },
    };
  };
  return system.spawn(behavior, std::move(owners), std::move(facts), std::move(obs));
}

}  // namespace kvrt::actors
