#pragma once
// The PrefixBatch loop both prefix-reuse owners' actors share (the hash-chain
// index, actors/prefix_actor.cpp, and the radix index, actors/radix_actor.cpp):
// decode the batch, answer match ops at once, and hand each publication to
// the owner's own cross-owner sequence, which resumes the loop when its owner
// round trips end. One outcome per op, in order; one receipt per batch.
// Include only from actors/*.cpp (CAF).
#include <memory>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"

namespace kvrt::actors {

struct IndexBatchRun {
  const char* actor = "";  // the owner's name in log lines
  std::shared_ptr<spdlog::logger> log;
  SessionId session;
  PrefixBatch batch;
  PrefixBatchReceipt receipt;
  caf::typed_response_promise<wire_bytes> promise;
  size_t next = 0;

  // Records the current op's outcome and moves to the next op.
  void answer(PrefixOutcome outcome) {
    receipt.outcomes.push_back(std::move(outcome));
    ++next;
  }
};

// Runs ops from run->next on. `publish(run, op)` owns a publication and must
// call answer() and then this function again when it is done.
template <class Service, class Publish>
void run_index_batch(Service& service, const std::shared_ptr<IndexBatchRun>& run, Publish&& publish) {
  while (run->next < run->batch.ops.size()) {
    const PrefixOp& op = run->batch.ops[run->next];
    if (const auto* m = std::get_if<PrefixMatchOp>(&op)) {
      Result<PrefixMatchReceipt> r = service.match(run->session, *m);
      run->answer(r.ok() ? PrefixOutcome(std::move(*r)) : PrefixOutcome(r.error()));
      continue;
    }
    const auto& pub = std::get<PrefixPublishOp>(op);
    if (Status st = service.check_publication(run->session, pub); !st.ok()) {
      run->answer(st.error());
      continue;
    }
    publish(run, pub);
    return;  // continues in the owners' replies
  }
  log_answered(run->log, run->actor, run->session.value, run->batch.trace, run->receipt);
  run->promise.deliver(to_wire(codec::encode(run->receipt)));
}

// Phase 1 of a publication: the request's table from the allocator owner.
// on_table(view) continues; a request without a table this session may
// publish, or an unreachable allocator, answers the op through done().
template <class Self, class Done, class OnTable>
void with_request_table(Self self, const allocator_actor& allocator, const std::shared_ptr<IndexBatchRun>& run,
                        const PrefixPublishOp& op, Done done, OnTable on_table) {
  self->request(allocator, caf::infinite, table_atom::value, run->session.value, op.request.value)
      .await(
          [op, done, on_table](BlockTableView& view) mutable {
            if (view.groups.empty()) {
              done(make_error(
                  ErrorCode::unknown_request,
                  "request " + std::to_string(op.request.value) + " has no block table this session may publish",
                  "request"));
              return;
            }
            on_table(view);
          },
          [done](caf::error& e) mutable {
            done(make_error(ErrorCode::rpc_failed, "allocator table: " + caf::to_string(e), "allocator"));
          });
}

// Step 3 of the executable-reuse transaction (0x0CD) for either index owner:
// one candidate, miss or typed error per lookup.
template <class Service>
std::vector<CandidateReply> reuse_candidates(Service& service, SessionId session,
                                             const std::vector<PrefixMatchOp>& lookups) {
  std::vector<CandidateReply> replies;
  replies.reserve(lookups.size());
  for (const PrefixMatchOp& op : lookups) {
    Result<CandidateAnswer> c = service.reuse_candidate(session, op);
    replies.push_back(c.ok() ? CandidateReply(std::move(c).value()) : CandidateReply(c.error()));
  }
  return replies;
}

// Decodes one PrefixBatch message and starts its run; malformed bytes answer
// an encoded typed Error and the actor keeps serving.
template <class Self, class Start>
caf::result<wire_bytes> start_index_batch(Self self, uint64_t session, const wire_bytes& bytes,
                                          const Observability& obs, const char* actor, const char* slice_name,
                                          Start&& start) {
  TraceSlice slice(obs.trace, actor, slice_name, {});
  Result<PrefixBatch> batch = codec::decode<PrefixBatch>(as_span(bytes));
  if (!batch.ok()) {
    log_rejected(obs.log, actor, session, batch.error());
    return to_wire(codec::encode(ErrorMessage{batch.error()}));
  }
  slice.set_trace(batch->trace);
  if (obs.trace) obs.trace->flow_finish(actor, ChromeTraceRecorder::now_us(), flow_id(batch->trace));
  auto run = std::make_shared<IndexBatchRun>();
  run->actor = actor;
  run->log = obs.log;
  run->session = SessionId{session};
  run->receipt.trace = batch->trace;
  run->receipt.outcomes.reserve(batch->ops.size());
  run->batch = std::move(*batch);
  run->promise = self->template make_response_promise<wire_bytes>();
  start(run);
  return run->promise;
}

}  // namespace kvrt::actors
