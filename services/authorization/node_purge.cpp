#include "services/authorization/node_purge.hpp"

#include <algorithm>

namespace kvrt {

Result<NodePurge> NodePurge::begin(AuthorizationService& service, SessionId session,
                                   const NamespacePurgeRequest& request, uint64_t now_us,
                                   const std::function<bool(PurgeId)>& in_progress) {
  Result<std::optional<PurgeId>> open = service.open_purge(session, request.namespace_name);
  if (!open.ok()) return open.error();
  if (*open && in_progress && !in_progress(**open)) return resume(service, request, **open, now_us);
  Result<AuthorizationService::BegunPurge> begun = service.begin_purge(session, request);
  if (!begun.ok()) return begun.error();
  NodePurge run = at_progress(service, request, begun->stop_admitting.purge, now_us);
  run.receipt_.ended_grants = begun->ended_grants;
  run.record(PurgeStep::stop_admitting, now_us, 0, 0, 0, "requests admitted to generation g from here on");
  run.record(PurgeStep::advance_generation, now_us, 0, 0, begun->ended_grants, "grants of g ended");
  run.next_ = PurgeIndexAdvance{request.namespace_name, run.successor_};
  (void)run.fault_fired(PurgeStep::advance_generation, now_us);
  return run;
}

NodePurge NodePurge::at_progress(AuthorizationService& service, const NamespacePurgeRequest& request, PurgeId id,
                                 uint64_t now_us) {
  const PurgeProgress* p = service.authority().purge(id);
  KVRT_ASSERT(p != nullptr && !p->completed(), "a node purge of a purge that is not open");
  NodePurge run(service, request, now_us);
  run.purge_ = id;
  run.g_ = p->purged_generation;
  run.successor_ = p->successor_generation;
  NamespacePurgeReceipt& r = run.receipt_;
  r.trace = request.trace;
  r.namespace_name = p->namespace_name;
  r.purge_id = id.value;
  r.cause = request.cause;
  r.purged_generation = run.g_;
  r.successor_generation = run.successor_;
  return run;
}

Result<NodePurge> NodePurge::resume(AuthorizationService& service, const NamespacePurgeRequest& request, PurgeId id,
                                    uint64_t now_us) {
  const PurgeProgress* p = service.authority().purge(id);
  KVRT_ASSERT(p != nullptr && p->pending.empty(), "a node purge stopped with work items unacknowledged");
  // Steps 1 and 2 are one call of begin_purge, and a completed purge is not
  // open: a run stops only after steps 2-6.
  KVRT_ASSERT(p->last_step >= PurgeStep::advance_generation && p->last_step < PurgeStep::complete,
              "a node purge stopped outside steps 2-6");
  NamespacePurgeRequest own = request;
  own.cause = p->request.cause;
  own.overwrite = p->request.physical_mode == PhysicalReleaseMode::overwrite;
  NodePurge run = at_progress(service, own, id, now_us);
  run.receipt_.resumed_after = std::string(to_string(p->last_step));
  switch (p->last_step) {
    case PurgeStep::advance_generation:
      run.next_ = PurgeIndexAdvance{own.namespace_name, run.successor_};
      break;
    case PurgeStep::invalidate_index:
      run.phase_ = Phase::drain;
      run.next_ = PurgeReceiptCount{own.namespace_name, run.g_, false};
      break;
    case PurgeStep::drain_leases:
      run.start_release(now_us);
      break;
    case PurgeStep::release_physical:
      run.after_release(now_us);
      break;
    case PurgeStep::remove_external_copies:
      run.phase_ = Phase::confirm;
      run.next_ = PurgeReceiptCount{own.namespace_name, run.g_, true};
      break;
    case PurgeStep::stop_admitting:
    case PurgeStep::complete:
      break;  // excluded above
  }
  return run;
}

bool NodePurge::fault_fired(PurgeStep step, uint64_t now_us) {
  FaultPoints& faults = service_->purge_faults();
  const std::string point = "after_" + std::string(to_string(step));
  if (!faults.any_armed() || !faults.reached(point)) return false;
  fail(make_error(ErrorCode::fault_injected,
                  "fault point purge." + point + " fired: purge " + std::to_string(purge_.value) +
                      " stopped after step " + std::string(to_string(step)) +
                      " and stays open; the next purge of the namespace resumes it",
                  "purge"),
       now_us);
  return true;
}

void NodePurge::record(PurgeStep step, uint64_t now_us, uint32_t work_items, uint64_t live_receipts, uint64_t count,
                       std::string detail) {
  receipt_.steps.push_back(PurgeStepRecord{std::string(to_string(step)), now_us - start_us_, work_items, live_receipts,
                                           count, std::move(detail)});
}

bool NodePurge::authority_step(PurgeStep step, uint64_t now_us, uint64_t live_receipts, uint64_t count,
                               std::string detail) {
  Result<PurgeStepReceipt> r = service_->advance_purge(purge_);
  if (!r.ok()) {
    fail(r.error(), now_us);
    return false;
  }
  KVRT_ASSERT(r->step == step, "a node purge's authority steps went out of order");
  // The node's owners have done this step's work before it is recorded
  // (the index dropped g's candidates, the allocator marked its blocks), so
  // its items are acknowledged at once.
  for (const PurgeWorkItem& w : r->work_items)
    if (w.kind != PurgeWorkKind::cancel_lease)
      if (Status ack = service_->acknowledge_purge_work(purge_, w.id); !ack.ok()) {
        fail(ack.error(), now_us);
        return false;
      }
  record(step, now_us, static_cast<uint32_t>(r->work_items.size()), live_receipts, count, std::move(detail));
  return !fault_fired(step, now_us);
}

void NodePurge::fail(Error e, uint64_t now_us) {
  error_ = std::move(e);
  phase_ = Phase::done;
  next_.reset();
  receipt_.duration_us = now_us - start_us_;
  service_->record_purge(false, receipt_.duration_us, 0);
}

void NodePurge::failed(Error error, uint64_t now_us) { fail(std::move(error), now_us); }

void NodePurge::answer(uint64_t count, uint64_t now_us) {
  KVRT_ASSERT(next_.has_value(), "an answer to a finished node purge");
  const uint64_t deadline_us = start_us_ + uint64_t{request_.deadline_ms} * 1000;
  switch (phase_) {
    case Phase::index:
      receipt_.dropped_index_pages = count;
      if (!authority_step(PurgeStep::invalidate_index, now_us, 0, count,
                          "pages of g the index gave back; g's keys match no lookup of g+1"))
        return;
      phase_ = Phase::drain;
      next_ = PurgeReceiptCount{request_.namespace_name, g_, false};
      return;
    case Phase::drain:
      if (std::holds_alternative<PurgeWait>(*next_)) {
        next_ = PurgeReceiptCount{request_.namespace_name, g_, false};
        return;
      }
      if (!first_count_) first_count_ = count;
      receipts_now_ = count;
      if (count == 0) return finish_drain(now_us);
      if (now_us >= deadline_us) {
        phase_ = Phase::revoke;
        next_ = PurgeReceiptCount{request_.namespace_name, g_, true};
        return;
      }
      next_ = PurgeWait{static_cast<uint32_t>(std::min<uint64_t>(kPollMs, (deadline_us - now_us + 999) / 1000))};
      return;
    case Phase::revoke:
      receipt_.receipts_revoked += count;
      return finish_drain(now_us);
    case Phase::overwrite:
      receipt_.blocks_marked_for_overwrite = count;
      if (!authority_step(PurgeStep::release_physical, now_us, 0, count,
                          "blocks marked: each is zeroed before its next owner"))
        return;
      return after_release(now_us);
    case Phase::external:
      receipt_.external_copies = count;
      if (!authority_step(PurgeStep::remove_external_copies, now_us, 0, count,
                          "saves of g in the session tier deleted (0 without a [tier])"))
        return;
      phase_ = Phase::confirm;
      next_ = PurgeReceiptCount{request_.namespace_name, g_, true};
      return;
    case Phase::confirm:
      receipt_.receipts_revoked += count;
      revoked_at_completion_ = count;
      phase_ = Phase::final_drop;
      next_ = PurgeIndexAdvance{request_.namespace_name, successor_};
      return;
    case Phase::final_drop: {
      receipt_.dropped_index_pages += count;
      if (!authority_step(PurgeStep::complete, now_us, 0, revoked_at_completion_,
                          "receipts of g revoked at completion; none of g remains"))
        return;
      phase_ = Phase::done;
      next_.reset();
      receipt_.duration_us = now_us - start_us_;
      service_->record_purge(true, receipt_.duration_us, receipt_.receipts_revoked);
      return;
    }
    case Phase::done:
      KVRT_ASSERT(false, "an answer to a finished node purge");
      return;
  }
}

// After step 5: step 6, the session tier's copies of g (the reuse owner
// holds the tier), then step 7's last revocation.
void NodePurge::after_release(uint64_t) {
  phase_ = Phase::external;
  next_ = PurgeTierRetire{request_.namespace_name, g_};
}

void NodePurge::finish_drain(uint64_t now_us) {
  const uint64_t first = first_count_.value_or(0);
  receipt_.receipts_drained = first - std::min(first, receipt_.receipts_revoked);
  if (!authority_step(PurgeStep::drain_leases, now_us, receipts_now_, receipt_.receipts_revoked,
                      "receipts of g revoked at the deadline"))
    return;
  start_release(now_us);
}

void NodePurge::start_release(uint64_t now_us) {
  if (request_.overwrite) {
    phase_ = Phase::overwrite;
    next_ = PurgeBlockOverwrite{request_.namespace_name};
    return;
  }
  // Release mode: step 3 gave the index's leases of g back; blocks that
  // requests of g still hold return to the pool when those requests end.
  if (!authority_step(PurgeStep::release_physical, now_us, 0, 0,
                      "released, not overwritten: a block's valid-row frontier hides its old rows"))
    return;
  after_release(now_us);
}

Result<NamespacePurgeReceipt> NodePurge::result() const {
  KVRT_ASSERT(finished(), "a node purge's result before it finished");
  if (error_) return *error_;
  return receipt_;
}

}  // namespace kvrt
