#include "services/reuse/reuse_batch_run.hpp"

#include <algorithm>
#include <string>

#include "services/common/assert.hpp"
#include "services/reuse/reuse_funnel_counters.hpp"

namespace kvrt {

ReuseBatchRun::ReuseBatchRun(ReuseBatch batch, std::vector<PoolGenerationRef> node_pools, uint32_t block_tokens,
                             uint32_t cache_groups, FaultPoints* faults)
    : batch_(std::move(batch)),
      node_pools_(std::move(node_pools)),
      block_tokens_(block_tokens),
      cache_groups_(cache_groups),
      faults_(faults),
      ops_(batch_.ops.size()) {
  for (size_t i = 0; i < batch_.ops.size(); ++i) {
    const auto* acquire = std::get_if<ReuseAcquireOp>(&batch_.ops[i]);
    if (acquire == nullptr) continue;  // a release op: release_requests()
    if (acquire->tokens.empty()) {
      end_with_error(i, make_error(ErrorCode::invalid_argument, "a reuse op names its prompt tokens", "tokens"));
      continue;
    }
    Result<ReuseAttempt> a =
        ReuseAttempt::begin(ReuseRequest{acquire->request, acquire->request_generation, acquire->namespace_name,
                                         acquire->require_collision_witness, acquire->identity});
    if (!a.ok()) {
      end_with_error(i, a.error());
      continue;
    }
    ops_[i].attempt = std::move(a).value();
  }
}

namespace {
// Steps 1-8 of an acquire op carry a fault point each (settle()); step 9's
// is the release op's (successor_requests()). Step 10 is the commit itself:
// after it there is nothing left to fail.
constexpr uint8_t kFaultedSteps = static_cast<uint8_t>(ReuseStep::freeze_snapshot);

std::string fault_point_after(ReuseStep step) { return "after_" + std::string(to_string(step)); }
}  // namespace

std::vector<std::string> ReuseBatchRun::fault_point_names() {
  std::vector<std::string> names;
  for (uint8_t s = 1; s <= kFaultedSteps; ++s) names.push_back(fault_point_after(static_cast<ReuseStep>(s)));
  names.push_back(fault_point_after(ReuseStep::execute));
  return names;
}

const ReuseAcquireOp& ReuseBatchRun::acquire_op(size_t i) const { return std::get<ReuseAcquireOp>(batch_.ops[i]); }

// --- stage 0: release ops, steps 9-10 ------------------------------------------

void ReuseBatchRun::bind(OpenReuseAttempts& open, SessionId session) {
  size_t room = open.room(session);
  for (size_t i = 0; i < batch_.ops.size(); ++i) {
    if (const auto* release = std::get_if<ReuseReleaseOp>(&batch_.ops[i])) {
      std::optional<ReuseAttempt> a = open.take(session, release->snapshot);
      if (!a && open.was_revoked(session, release->snapshot)) {
        end_with_error(i, make_error(ErrorCode::reuse_receipt_revoked,
                                     "a purge of its namespace generation revoked the reuse receipt with snapshot " +
                                         std::to_string(release->snapshot.value) +
                                         " and returned its leases; the rows it names may be reused by others",
                                     "snapshot"));
        continue;
      }
      if (!a) {
        end_with_error(i, make_error(ErrorCode::reuse_attempt_closed,
                                     "this session holds no open reuse attempt with snapshot " +
                                         std::to_string(release->snapshot.value),
                                     "snapshot"));
        continue;
      }
      if (release->successor) {
        const ReuseSuccessor& s = *release->successor;
        const uint64_t rows = uint64_t{s.end_block} * block_tokens_;
        const uint32_t reused_end = a->receipt() ? a->receipt()->covered_interval.end : 0;
        std::string why;
        if (!release->executed)
          why = "a successor of work that did not run (executed = false)";
        else if (s.end_block == 0 || rows < reused_end)
          why = "a successor of " + std::to_string(rows) + " rows does not contain the " + std::to_string(reused_end) +
                " reused rows";
        else if (s.tokens.size() < rows)
          why = "a successor of " + std::to_string(rows) + " rows names only " + std::to_string(s.tokens.size()) +
                " tokens";
        if (!why.empty()) {
          // Nothing happened: the attempt stays open for a correct release op.
          (void)open.hold(session, std::move(*a));
          end_with_error(i, make_error(ErrorCode::invalid_argument, why, "successor"));
          continue;
        }
      }
      ops_[i].attempt = std::move(a);
    } else if (!ops_[i].outcome) {
      if (room == 0) {
        ops_[i].attempt.reset();
        end_with_error(i, make_error(ErrorCode::invalid_argument,
                                     "the session holds " + std::to_string(OpenReuseAttempts::kPerSession) +
                                         " open reuse attempts; release some first",
                                     "session"));
        continue;
      }
      --room;
    }
  }
}

std::vector<PrefixOp> ReuseBatchRun::successor_requests() {
  stage_.clear();
  std::vector<PrefixOp> out;
  for (size_t i = 0; i < batch_.ops.size(); ++i) {
    const auto* release = std::get_if<ReuseReleaseOp>(&batch_.ops[i]);
    if (release == nullptr || !release->successor || ops_[i].outcome || !ops_[i].attempt) continue;
    // A transaction that fails after step 9 has published nothing yet
    // (0x04F, before publication): step 10 falls back to a plain release of
    // the attempt's leases, and the receipt says why there is no successor.
    if (faults_ != nullptr && faults_->reached(fault_point_after(ReuseStep::execute))) {
      ops_[i].successor =
          PrefixOutcome(make_error(ErrorCode::fault_injected,
                                   "fault point reuse." + fault_point_after(ReuseStep::execute) +
                                       " fired: the successor was not published; the attempt's leases were released",
                                   "successor"));
      continue;
    }
    stage_.push_back(i);
    const ReuseSuccessor& s = *release->successor;
    // The successor is published under the identity and the generation its
    // acquire was matched with: its rows were computed with the same extras
    // and the same weights, and a session that authorized a successor
    // generation since must not carry them into it (0x0CE).
    const auto& receipt = ops_[i].attempt->receipt();
    out.push_back(PrefixPublishOp{ops_[i].attempt->request().namespace_name, s.request, s.tokens, 0, s.end_block,
                                  ops_[i].attempt->request().identity,
                                  receipt ? receipt->namespace_generation : NamespaceGeneration{}});
  }
  return out;
}

void ReuseBatchRun::on_successors(const Result<PrefixBatchReceipt>& published) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    OpRun& op = ops_[stage_[k]];
    if (!published.ok())
      op.successor = PrefixOutcome(published.error());
    else if (k < published->outcomes.size())
      op.successor = published->outcomes[k];
    else
      op.successor = PrefixOutcome(
          make_error(ErrorCode::invalid_argument, "the index answered fewer outcomes than ops", "successor"));
  }
  stage_.clear();
}

ReuseBatchRun::LeaseReturn ReuseBatchRun::release_requests() {
  stage_.clear();
  LeaseReturn out;
  for (size_t i = 0; i < batch_.ops.size(); ++i) {
    if (!std::holds_alternative<ReuseReleaseOp>(batch_.ops[i]) || ops_[i].outcome || !ops_[i].attempt) continue;
    stage_.push_back(i);
    for (LeaseId l : ops_[i].attempt->acquired_leases()) out.add(l);
  }
  return out;
}

void ReuseBatchRun::on_released(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& paths) {
  size_t b = 0, p = 0;
  for (size_t i : stage_) {
    OpRun& op = ops_[i];
    const ReuseReleaseOp& release = std::get<ReuseReleaseOp>(batch_.ops[i]);
    ReuseReleaseReceipt r;
    r.snapshot = release.snapshot;
    for (LeaseId l : op.attempt->acquired_leases()) {
      const bool path = lease_owner(l) == LeaseOwner::radix_index;
      const size_t k = path ? p++ : b++;
      const std::vector<uint8_t>& flags = path ? paths : blocks;
      (k < flags.size() && flags[k] != 0 ? r.released : r.refused).push_back(l);
    }
    // Step 9: the worker's report. Step 10: exactly the attempt's leases,
    // or the attempt stays executed but not completed (an owner had lost
    // some, which the receipt lists).
    Result<StepOutcome> executed = op.attempt->execute(ExecutionAnswer{release.snapshot, release.executed});
    CompletionAnswer completion(LeasesReleased{r.released});
    if (op.successor) {
      if (const auto* p = std::get_if<PrefixPublishReceipt>(&*op.successor)) {
        r.successor = *p;
        // A publication that made nothing visible after what the attempt
        // read (every block already there) leaves the predecessor as it was:
        // a plain release.
        if (p->publication_generation > op.attempt->read_publication_generation())
          completion = SuccessorPublished{r.released, p->publication_generation,
                                          TokenInterval{0, release.successor->end_block * block_tokens_}, true};
      } else if (const auto* e = std::get_if<Error>(&*op.successor)) {
        r.successor_refused = *e;
      } else {
        r.successor_refused =
            make_error(ErrorCode::invalid_argument, "the index answered a publication with a match", "successor");
      }
    }
    if (executed.ok() && executed->advanced()) {
      r.completed = op.attempt->finish(completion).ok();
      r.published_successor = r.completed && std::holds_alternative<SuccessorPublished>(completion);
    }
    op.ended = op.attempt->funnel_outcome();
    op.outcome = ReuseOutcome(std::move(r));
  }
  stage_.clear();
}

std::vector<size_t> ReuseBatchRun::open_at(ReuseStep step) {
  stage_.clear();
  for (size_t i = 0; i < ops_.size(); ++i)
    if (!ops_[i].outcome && ops_[i].attempt && ops_[i].attempt->phase() == ReusePhase::open &&
        ops_[i].attempt->next_step() == step && std::holds_alternative<ReuseAcquireOp>(batch_.ops[i]))
      stage_.push_back(i);
  return stage_;
}

void ReuseBatchRun::end_with_error(size_t i, Error e) {
  OpRun& op = ops_[i];
  // An error leaves the attempt as it was: the leases it holds go back, and
  // so do block leases still waiting for their path lease.
  if (op.attempt) op.release = op.attempt->acquired_leases();
  op.release.insert(op.release.end(), op.pending.begin(), op.pending.end());
  op.pending.clear();
  op.outcome = ReuseOutcome(std::move(e));
}

void ReuseBatchRun::acquire(size_t i, const LeaseAnswer& answer, const std::vector<LeaseId>& give_back) {
  OpRun& op = ops_[i];
  op.pending.clear();
  settle(i, op.attempt->acquire_leases(answer));
  if (give_back.empty() || !op.outcome) return;
  // Leases the attempt never accepted (the path was refused after the
  // blocks were leased): released with the rest.
  op.release.insert(op.release.end(), give_back.begin(), give_back.end());
  if (auto* r = std::get_if<ReuseRejectionReceipt>(&*op.outcome))
    r->leases_released.insert(r->leases_released.end(), give_back.begin(), give_back.end());
}

void ReuseBatchRun::settle(size_t i, const Result<StepOutcome>& step) {
  if (!step.ok()) return end_with_error(i, step.error());
  if (faults_ != nullptr && faults_->any_armed() && step->advanced() &&
      static_cast<uint8_t>(step->step) <= kFaultedSteps && faults_->reached(fault_point_after(step->step)))
    return end_with_error(
        i, make_error(ErrorCode::fault_injected,
                      "fault point reuse." + fault_point_after(step->step) + " fired: the attempt ended after step " +
                          std::to_string(static_cast<unsigned>(step->step)) + " and handed back its leases",
                      std::string(to_string(step->step))));
  OpRun& op = ops_[i];
  if (step->rejection) {
    const ReuseRejection& r = *step->rejection;
    op.release = r.leases_to_release;
    op.outcome = ReuseOutcome(ReuseRejectionReceipt{r.step, r.reason, r.detail, r.leases_to_release});
  } else if (step->receipt) {
    op.outcome = ReuseOutcome(*step->receipt);
  }
}

// --- stage 1: authorization owner, steps 1-2 -----------------------------------

std::vector<ReuseKeyRequest> ReuseBatchRun::key_requests() {
  std::vector<ReuseKeyRequest> out;
  for (size_t i : open_at(ReuseStep::authorize))
    out.push_back(ReuseKeyRequest{acquire_op(i).namespace_name, acquire_op(i).tokens});
  return out;
}

void ReuseBatchRun::on_keys(const std::vector<ReuseKeyAnswer>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i,
                     make_error(ErrorCode::invariant_violated, "the authorization owner answered too few ops", "keys"));
      continue;
    }
    OpRun& op = ops_[i];
    settle(i, op.attempt->authorize(answers[k].authorization));
    if (op.outcome) continue;
    if (!answers[k].key) {
      end_with_error(i, make_error(ErrorCode::invariant_violated, "no key was built for an authorized request", "key"));
      continue;
    }
    op.planned_abi = answers[k].key->manifest.cache_abi_sha256;
    settle(i, op.attempt->build_key(*answers[k].key));
  }
}

// --- stage 2: index owner, step 3 ---------------------------------------------

std::vector<PrefixMatchOp> ReuseBatchRun::candidate_requests() {
  std::vector<PrefixMatchOp> out;
  for (size_t i : open_at(ReuseStep::lookup_candidate)) {
    const ReuseAcquireOp& op = acquire_op(i);
    out.push_back(
        PrefixMatchOp{op.namespace_name, op.request, op.request_generation, op.tokens, op.logits_path, op.identity});
  }
  return out;
}

void ReuseBatchRun::on_candidates(const std::vector<CandidateReply>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i, make_error(ErrorCode::invariant_violated, "the index owner answered too few ops", "lookup"));
      continue;
    }
    OpRun& op = ops_[i];
    if (const auto* refused = std::get_if<Error>(&answers[k])) {
      // The index refused the lookup itself. Its grant view lags the
      // authorization owner's (a generation advanced between the two
      // messages): that is an authorization outcome at this step, the same
      // bucket the index's own funnel counts it in. Anything else is an error.
      const Error& e = *refused;
      if (const auto reason = authorization_rejection(e.code)) {
        op.outcome = ReuseOutcome(ReuseRejectionReceipt{ReuseStep::lookup_candidate, *reason, e.reason, {}});
      } else {
        end_with_error(i, e);
      }
      continue;
    }
    CandidateAnswer answer = std::get<CandidateAnswer>(answers[k]);
    if (auto* c = std::get_if<ReuseCandidate>(&answer)) {
      // g_pool as the lookup read it: the node's pools that the handles name.
      c->pool_generations.clear();
      for (const PoolGenerationRef& p : node_pools_)
        if (std::any_of(c->physical_handles.begin(), c->physical_handles.end(),
                        [&](const PhysicalBlockHandle& h) { return h.pool == p.pool; }))
          c->pool_generations.push_back(p);
      op.candidate = *c;
    }
    settle(i, op.attempt->lookup(answer));
  }
}

// --- stage 3: allocator owner, step 4 (and step 5's pool part) ---------------

std::vector<ReuseLeaseRequest> ReuseBatchRun::lease_requests() {
  std::vector<ReuseLeaseRequest> out;
  for (size_t i : open_at(ReuseStep::acquire_leases)) {
    const ReuseCandidate& c = *ops_[i].candidate;
    const uint32_t bundles = cache_groups_ == 0 ? 0 : static_cast<uint32_t>(c.physical_handles.size() / cache_groups_);
    out.push_back(ReuseLeaseRequest{c.physical_handles, bundles});
  }
  return out;
}

void ReuseBatchRun::on_leases(const std::vector<ReuseLeaseAnswer>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i,
                     make_error(ErrorCode::invariant_violated, "the allocator owner answered too few ops", "leases"));
      continue;
    }
    OpRun& op = ops_[i];
    op.leased = answers[k];
    const auto* grant = std::get_if<LeaseGrant>(&answers[k].lease);
    if (grant != nullptr && !op.candidate->path_node_ids.empty()) {
      op.pending = grant->leases;  // the path lease completes the grant
      continue;
    }
    acquire(i, answers[k].lease, {});
  }
}

std::vector<ReusePathLeaseRequest> ReuseBatchRun::path_lease_requests() {
  stage_.clear();
  std::vector<ReusePathLeaseRequest> out;
  for (size_t i = 0; i < ops_.size(); ++i)
    if (!ops_[i].outcome && !ops_[i].pending.empty()) {
      stage_.push_back(i);
      out.push_back(ReusePathLeaseRequest{ops_[i].candidate->path_node_ids});
    }
  return out;
}

void ReuseBatchRun::on_path_leases(const std::vector<ReusePathLeaseAnswer>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i, make_error(ErrorCode::invariant_violated, "the index owner answered too few ops", "paths"));
      continue;
    }
    OpRun& op = ops_[i];
    const std::vector<LeaseId> blocks = op.pending;
    if (!answers[k].lease) {
      acquire(i, LeaseAnswer(LeaseRefused{"path: " + answers[k].refusal}), blocks);
      continue;
    }
    LeaseGrant g = std::get<LeaseGrant>(op.leased.lease);
    g.leases.push_back(*answers[k].lease);
    g.covered_path_nodes = op.candidate->path_node_ids;
    acquire(i, LeaseAnswer(std::move(g)), {});
  }
}

// --- stage 4: index owner's versions, steps 5-7 ------------------------------

size_t ReuseBatchRun::version_requests() { return open_at(ReuseStep::validate_versions).size(); }

void ReuseBatchRun::on_index_version(const ReuseIndexVersion& version) {
  for (size_t i : stage_) {
    OpRun& op = ops_[i];
    settle(i, op.attempt->validate_versions(VersionAnswer{version.index_version, version.tree_version,
                                                          op.leased.pool_generations, op.leased.valid_frontier_tokens,
                                                          version.publication_generation}));
    if (op.outcome) continue;
    settle(i, op.attempt->validate_positions(PositionAnswer(PositionsNotApplicable{})));
    if (op.outcome) continue;
    // Rows copied into a request slot: the mapper owner's stage answers step 7.
    if (acquire_op(i).await_slot_mapping) continue;
    // Every row of a leased block of a resident pool is mapped (header).
    const uint32_t bundles =
        cache_groups_ == 0 ? 0 : static_cast<uint32_t>(op.candidate->physical_handles.size() / cache_groups_);
    settle(i, op.attempt->await_mapping(MappingAnswer{op.candidate->covered_interval.end, bundles * block_tokens_}));
  }
}

// --- stage 5: mapper owner, step 7 of ops whose rows land in a slot ------------

std::vector<SlotFrontierRequest> ReuseBatchRun::frontier_requests() {
  std::vector<SlotFrontierRequest> out;
  for (size_t i : open_at(ReuseStep::await_mapping))
    out.push_back(SlotFrontierRequest{acquire_op(i).slot_request, ops_[i].candidate->covered_interval.end});
  return out;
}

void ReuseBatchRun::on_frontiers(const std::vector<SlotFrontierReply>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i, make_error(ErrorCode::invariant_violated, "the mapper owner answered too few ops", "mapping"));
      continue;
    }
    // Not the session's bound request, or no mapper: the op's own error,
    // its leases handed back.
    if (const auto* e = std::get_if<Error>(&answers[k])) {
      end_with_error(i, *e);
      continue;
    }
    settle(i, ops_[i].attempt->await_mapping(
                  MappingAnswer{ops_[i].candidate->covered_interval.end, std::get<uint32_t>(answers[k])}));
  }
}

// --- stage 6: executor owner, step 8 ------------------------------------------

std::vector<ReuseSnapshotRequest> ReuseBatchRun::snapshot_requests() {
  std::vector<ReuseSnapshotRequest> out;
  for (size_t i : open_at(ReuseStep::freeze_snapshot))
    out.push_back(ReuseSnapshotRequest{ops_[i].candidate->physical_handles, ops_[i].candidate->covered_interval,
                                       ops_[i].planned_abi});
  return out;
}

void ReuseBatchRun::on_snapshots(const std::vector<SnapshotAnswer>& answers) {
  for (size_t k = 0; k < stage_.size(); ++k) {
    const size_t i = stage_[k];
    if (k >= answers.size()) {
      end_with_error(i,
                     make_error(ErrorCode::invariant_violated, "the executor owner answered too few ops", "snapshot"));
      continue;
    }
    settle(i, ops_[i].attempt->freeze_snapshot(answers[k]));
  }
}

// --- the end --------------------------------------------------------------------

void ReuseBatchRun::on_stage_failed(const Error& e) {
  for (size_t i : stage_)
    if (!ops_[i].outcome) end_with_error(i, e);
  stage_.clear();
}

ReuseBatchRun::LeaseReturn ReuseBatchRun::leases_to_release() const {
  LeaseReturn out;
  for (const OpRun& op : ops_) {
    if (op.outcome && std::holds_alternative<ExecutableReuseReceipt>(*op.outcome)) continue;
    // An op no stage finished holds what its attempt acquired.
    std::vector<LeaseId> held = op.outcome ? op.release : op.attempt ? op.attempt->acquired_leases() : op.release;
    if (!op.outcome) held.insert(held.end(), op.pending.begin(), op.pending.end());
    for (LeaseId l : held) out.add(l);
  }
  return out;
}

ReuseBatchRun::LeaseReturn ReuseBatchRun::all_leases() const {
  LeaseReturn out = leases_to_release();
  for (const OpRun& op : ops_)
    if (op.outcome)
      if (const auto* r = std::get_if<ExecutableReuseReceipt>(&*op.outcome))
        for (LeaseId l : r->leases) out.add(l);
  return out;
}

ReuseBatchReceipt ReuseBatchRun::receipt() const {
  ReuseBatchReceipt out;
  out.trace = batch_.trace;
  for (const OpRun& op : ops_) {
    if (op.outcome) {
      out.outcomes.push_back(*op.outcome);
      continue;
    }
    std::string where = op.attempt ? std::string(to_string(op.attempt->next_step())) : "begin";
    out.outcomes.emplace_back(std::in_place_type<Error>,
                              make_error(ErrorCode::invariant_violated,
                                         "the reuse sequence stopped before this op finished", std::move(where)));
  }
  return out;
}

std::vector<FunnelOutcome> ReuseBatchRun::funnel_outcomes() const {
  std::vector<FunnelOutcome> out;
  for (const OpRun& op : ops_) {
    if (op.ended)
      out.push_back(*op.ended);
    else if (op.outcome)
      if (const auto* r = std::get_if<ReuseRejectionReceipt>(&*op.outcome))
        out.push_back(FunnelOutcome::rejected(r->reason));
  }
  return out;
}

std::vector<ReuseAttempt> ReuseBatchRun::take_receipt_attempts() {
  std::vector<ReuseAttempt> out;
  for (OpRun& op : ops_)
    if (op.attempt && op.outcome && std::holds_alternative<ExecutableReuseReceipt>(*op.outcome)) {
      out.push_back(std::move(*op.attempt));
      op.attempt.reset();
    }
  return out;
}

}  // namespace kvrt

// --- the stage order, walked once ----------------------------------------------

namespace kvrt {

std::optional<ReuseBatchRun::Request> ReuseBatchRun::next() {
  KVRT_ASSERT(!asked_, "ReuseBatchRun::next() while the last stage's answer is outstanding");
  while (stage_at_ != Stage::done) {
    asked_ = true;
    switch (stage_at_) {
      case Stage::successors:
        if (std::vector<PrefixOp> ops = successor_requests(); !ops.empty())
          return Request(SuccessorPublish{PrefixBatch{batch_.trace, std::move(ops)}});
        break;
      case Stage::release_blocks:
        release_round_ = ReleaseRound{release_requests(), {}, {}, std::nullopt};
        if (!release_round_.leases.blocks.empty()) return Request(BlockLeaseReturn{release_round_.leases.blocks});
        break;
      case Stage::release_paths:
        if (!release_round_.leases.paths.empty()) return Request(PathLeaseReturn{release_round_.leases.paths});
        settle_release();
        break;
      case Stage::keys:
        if (std::vector<ReuseKeyRequest> r = key_requests(); !r.empty()) return Request(KeyLookup{std::move(r)});
        break;
      case Stage::candidates:
        if (std::vector<PrefixMatchOp> r = candidate_requests(); !r.empty())
          return Request(CandidateLookup{std::move(r)});
        break;
      case Stage::leases:
        if (std::vector<ReuseLeaseRequest> r = lease_requests(); !r.empty())
          return Request(BlockLeaseAcquire{std::move(r)});
        break;
      case Stage::paths:
        if (std::vector<ReusePathLeaseRequest> r = path_lease_requests(); !r.empty())
          return Request(PathLeaseAcquire{std::move(r)});
        break;
      case Stage::versions:
        if (version_requests() > 0) return Request(IndexVersionRead{});
        break;
      case Stage::mapping:
        if (std::vector<SlotFrontierRequest> r = frontier_requests(); !r.empty())
          return Request(SlotFrontierRead{std::move(r)});
        break;
      case Stage::snapshots:
        if (std::vector<ReuseSnapshotRequest> r = snapshot_requests(); !r.empty())
          return Request(SnapshotFreeze{std::move(r)});
        break;
      case Stage::done:
        break;
    }
    // Nothing to ask at this stage: on to the next.
    asked_ = false;
    stage_at_ = static_cast<Stage>(static_cast<uint8_t>(stage_at_) + 1);
  }
  return std::nullopt;
}

namespace {
const char* stage_owner(uint8_t stage) {
  constexpr const char* owners[] = {"prefix_index", "allocator",    "prefix_index", "authorization", "prefix_index",
                                    "allocator",    "prefix_index", "prefix_index", "mapper",        "executor"};
  return stage < std::size(owners) ? owners[stage] : "none";
}
}  // namespace

void ReuseBatchRun::settle_release() {
  if (release_round_.failed)
    on_stage_failed(*release_round_.failed);
  else
    on_released(release_round_.blocks, release_round_.paths);
}

#define KVRT_REUSE_EXPECT(stage)                                                                           \
  KVRT_ASSERT(asked_&& stage_at_ == (stage), std::string("ReuseBatchRun got an answer for stage ") +       \
                                                 stage_owner(static_cast<uint8_t>(stage)) + " while at " + \
                                                 stage_owner(static_cast<uint8_t>(stage_at_)))

void ReuseBatchRun::answer(const Result<PrefixBatchReceipt>& published) {
  KVRT_REUSE_EXPECT(Stage::successors);
  on_successors(published);
  asked_ = false;
  stage_at_ = Stage::release_blocks;
}

void ReuseBatchRun::answer(std::vector<uint8_t> released) {
  KVRT_ASSERT(asked_ && (stage_at_ == Stage::release_blocks || stage_at_ == Stage::release_paths),
              "ReuseBatchRun got lease flags outside the release stage");
  asked_ = false;
  if (stage_at_ == Stage::release_blocks) {
    release_round_.blocks = std::move(released);
    stage_at_ = Stage::release_paths;
    if (release_round_.leases.paths.empty()) {
      settle_release();
      stage_at_ = Stage::keys;
    }
    return;
  }
  release_round_.paths = std::move(released);
  settle_release();
  stage_at_ = Stage::keys;
}

void ReuseBatchRun::answer(const std::vector<ReuseKeyAnswer>& keys) {
  KVRT_REUSE_EXPECT(Stage::keys);
  on_keys(keys);
  asked_ = false;
  stage_at_ = Stage::candidates;
}

void ReuseBatchRun::answer(const std::vector<CandidateReply>& candidates) {
  KVRT_REUSE_EXPECT(Stage::candidates);
  on_candidates(candidates);
  asked_ = false;
  stage_at_ = Stage::leases;
}

void ReuseBatchRun::answer(const std::vector<ReuseLeaseAnswer>& leases) {
  KVRT_REUSE_EXPECT(Stage::leases);
  on_leases(leases);
  asked_ = false;
  stage_at_ = Stage::paths;
}

void ReuseBatchRun::answer(const std::vector<ReusePathLeaseAnswer>& paths) {
  KVRT_REUSE_EXPECT(Stage::paths);
  on_path_leases(paths);
  asked_ = false;
  stage_at_ = Stage::versions;
}

void ReuseBatchRun::answer(const ReuseIndexVersion& version) {
  KVRT_REUSE_EXPECT(Stage::versions);
  on_index_version(version);
  asked_ = false;
  stage_at_ = Stage::mapping;
}

void ReuseBatchRun::answer(const std::vector<SlotFrontierReply>& frontiers) {
  KVRT_REUSE_EXPECT(Stage::mapping);
  on_frontiers(frontiers);
  asked_ = false;
  stage_at_ = Stage::snapshots;
}

void ReuseBatchRun::answer(const std::vector<SnapshotAnswer>& snapshots) {
  KVRT_REUSE_EXPECT(Stage::snapshots);
  on_snapshots(snapshots);
  asked_ = false;
  stage_at_ = Stage::done;
}

void ReuseBatchRun::failed(const Error& e) {
  KVRT_ASSERT(asked_, "ReuseBatchRun::failed() with no stage outstanding");
  asked_ = false;
  switch (stage_at_) {
    case Stage::successors:
      // The successors are refused; their leases still go back.
      on_successors(e);
      stage_at_ = Stage::release_blocks;
      return;
    case Stage::release_blocks:
      release_round_.failed = e;
      stage_at_ = Stage::release_paths;
      if (release_round_.leases.paths.empty()) {
        settle_release();
        stage_at_ = Stage::keys;
      }
      return;
    case Stage::release_paths:
      release_round_.failed = e;
      settle_release();
      stage_at_ = Stage::keys;
      return;
    default:
      on_stage_failed(e);
      stage_at_ = static_cast<Stage>(static_cast<uint8_t>(stage_at_) + 1);
  }
}

#undef KVRT_REUSE_EXPECT

}  // namespace kvrt
