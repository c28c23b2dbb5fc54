#pragma once
// The prefix route as both index owners serve it (the hash chain and the
// radix index, one actor for either: actors/prefix_index_actor.cpp): a
// PrefixBatchRun (services/prefix/prefix_batch_run.hpp) whose requests go to
// the allocator owner. Each allocator answer is awaited (CAF `await`
// suspends this mailbox), so no other message changes the index between a
// publication's decision and its confirmation. Also step 3 of the reuse
// transaction, which both answer alike. Include only from actors/*.cpp (CAF).
#include <memory>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "actors/run_driver.hpp"
#include "services/common/overloaded.hpp"
#include "services/prefix/prefix_batch_run.hpp"

namespace kvrt::actors {

template <class Self, class Index>
caf::result<wire_bytes> serve_prefix_batch(Self self, Index& index, const allocator_actor& allocator,
                                           const Observability& obs, const char* actor, SessionId session,
                                           PrefixBatch batch) {
  using Run = PrefixBatchRun<Index>;
  auto promise = self->template make_response_promise<wire_bytes>();
  auto run = std::make_shared<Run>(index, session, std::move(batch));
  auto send = [self, allocator, session, run](const typename Run::Request& request, auto resume) {
    auto failed = [run, resume](caf::error& e) {
      run->failed(transport_error("allocator", e));
      resume();
    };
    std::visit(overloaded{
                   [&](const TableRead& read) {
                     on_answer<Waiting::awaiting>(
                         self->request(allocator, caf::infinite, table_atom::value, session.value, read.request.value),
                         [run, resume](BlockTableView& view) {
                           run->answer(view.groups.empty() ? std::nullopt : std::optional(std::move(view)));
                           resume();
                         },
                         failed);
                   },
                   [&](const TagApply& tags) {
                     on_answer<Waiting::awaiting>(
                         self->request(allocator, caf::infinite, tags_atom::value, tags.tags),
                         [run, resume](std::vector<uint8_t>& applied) {
                           run->answer(PublicationAnswer{std::move(applied), {}});
                           resume();
                         },
                         failed);
                   },
                   [&](const NodeLeaseAcquire& leases) {
                     on_answer<Waiting::awaiting>(
                         self->request(allocator, caf::infinite, lease_atom::value, leases.handles),
                         [run, resume](std::vector<std::optional<LeaseId>>& granted) {
                           run->answer(PublicationAnswer{{}, std::move(granted)});
                           resume();
                         },
                         failed);
                   },
                   [&](const NodeLeaseRelease& release) {
                     self->send(allocator, unlease_atom::value, release.leases);
                     resume();
                   },
               },
               request);
  };
  drive(run, send, [obs, actor, session, promise](const std::shared_ptr<Run>& r) mutable {
    PrefixBatchReceipt receipt = r->take_receipt();
    log_answered(obs.log, actor, session.value, receipt.trace, receipt);
    promise.deliver(to_wire(codec::encode(receipt)));
  });
  return promise;
}

// Step 3 of the executable-reuse transaction (0x0CD) for either index
// owner: one candidate, miss or typed error per lookup.
template <class Index>
std::vector<CandidateReply> reuse_candidates(Index& index, SessionId session,
                                             const std::vector<PrefixMatchOp>& lookups) {
  std::vector<CandidateReply> replies;
  replies.reserve(lookups.size());
  for (const PrefixMatchOp& op : lookups) {
    Result<CandidateAnswer> c = index.reuse_candidate(session, op);
    replies.push_back(c.ok() ? CandidateReply(std::move(c).value()) : CandidateReply(c.error()));
  }
  return replies;
}

}  // namespace kvrt::actors
