#pragma once
// ReuseAttempt: one executable-reuse transaction of spec 0x0CD as an explicit
// state machine. The node's reuse coordinator (ReuseBatchRun,
// reuse_batch_run.hpp) drives it with one owner message per step; each
// step takes the evidence for that step (reuse_evidence.hpp) and
//   - advances: the evidence is consistent and the step's gate holds;
//   - rejects:  the gate fails. The rejection names one reason, hence one
//     funnel bucket of 0x0CF, and lists the leases the caller must release.
//     The attempt is over (fallback may lose reuse, it may not weaken
//     exactness: 0x0CG), and its evidence is exactly as before the step;
//   - or answers a typed Error: evidence for another step
//     (reuse_step_out_of_order), any step after the attempt ended
//     (reuse_attempt_closed), or evidence that cannot belong to this attempt
//     (reuse_evidence_mismatch, invalid_manifest). Nothing changes.
//
// Where each failure lands (reuse_rejection.hpp has the full list):
//   step 1-2  authorization   (denied, closed, stale grant, key for another namespace/salt/generation)
//   step 3    index_miss; incompatible (isolation, d_sem, d_layout, witness); stale_generation (g_ns)
//   step 4    lease           (refused, or leases that do not cover every path node and handle)
//   step 5    stale_generation (v_index, v_tree, g_pool, valid frontier)
//   step 6    incompatible    (module tokens/positions/schema, session interval)
//   step 7    mapping_lag     (L_map > 0)
//   step 8    stale_snapshot  (v_exec, or a snapshot bound to other evidence)
//   step 9    execution
// The funnel of 0x0CF orders N_gen before N_lease while the transaction takes
// leases (4) before it validates versions (5): versions are read under the
// leases, or a concurrent publication could move them between check and use.
// A step-5 rejection is therefore counted as "not current", and an attempt
// refused at step 4 never reached its version check. Every rejection still
// lands in exactly one bucket, and the funnel stays monotone because each
// attempt is counted once, by its bucket.
//
// Step 8 fills the ExecutableReuseReceipt: G_use = G_auth & G_compat &
// G_version & G_lease & G_map & G_snapshot holds exactly then. Step 9
// executes against it; step 10 releases every lease or publishes one complete
// successor, and must account for exactly the leases the attempt holds.
#include <optional>
#include <vector>

#include "schema/prefix_types.hpp"
#include "services/common/digest.hpp"
#include "services/common/result.hpp"
#include "services/reuse/reuse_evidence.hpp"
#include "services/telemetry/reuse_funnel.hpp"

namespace kvrt {

struct ReuseRequest {
  RequestId request_id;
  RequestGeneration request_generation;
  std::string namespace_name;              // the namespace the request asks to reuse from
  bool require_collision_witness = false;  // step 3 policy (0x07F)
  RequestIdentity identity{};              // the request's identity extras (0x07B): its lookup's and successor's
};

struct ReuseRejection {
  ReuseStep step = ReuseStep::authorize;
  RejectionReason reason = RejectionReason::no_candidate;
  std::string detail;  // operands; never tokens, salts or tokens' text
  std::vector<LeaseId> leases_to_release;

  ReuseBucket bucket() const { return bucket_of(reason); }
  friend bool operator==(const ReuseRejection&, const ReuseRejection&) = default;
};

enum class ReuseCompletionKind : uint8_t { released = 0, published_successor = 1 };

struct ReuseCompletion {
  ReuseCompletionKind kind = ReuseCompletionKind::released;
  std::vector<LeaseId> released;
  uint64_t published_index_version = 0;  // published_successor only
  TokenInterval published_interval;      // published_successor only [tokens]
  friend bool operator==(const ReuseCompletion&, const ReuseCompletion&) = default;
};

struct StepOutcome {
  ReuseStep step = ReuseStep::authorize;
  std::optional<ReuseRejection> rejection;        // set: rejected
  std::optional<ExecutableReuseReceipt> receipt;  // step 8: the use gate holds
  std::optional<ReuseCompletion> completion;      // step 10
  bool advanced() const { return !rejection.has_value(); }
};

enum class ReusePhase : uint8_t {
  open = 0,       // steps 1-9 in progress
  executed = 1,   // step 9 passed; step 10 pending
  completed = 2,  // step 10 done
  rejected = 3,
};
std::string_view to_string(ReusePhase p);

class ReuseAttempt {
 public:
  // ErrorCode::invalid_argument for an empty namespace name.
  static Result<ReuseAttempt> begin(const ReuseRequest& request);

  // The step the evidence is for is step_of(evidence).
  Result<StepOutcome> advance(const StepEvidence& evidence);
  Result<StepOutcome> authorize(const AuthorizationAnswer& a) {
    return advance(StepEvidence(std::in_place_index<0>, a));
  }
  Result<StepOutcome> build_key(const KeyEvidence& k) { return advance(StepEvidence(std::in_place_index<1>, k)); }
  Result<StepOutcome> lookup(const CandidateAnswer& c) { return advance(StepEvidence(std::in_place_index<2>, c)); }
  Result<StepOutcome> acquire_leases(const LeaseAnswer& l) { return advance(StepEvidence(std::in_place_index<3>, l)); }
  Result<StepOutcome> validate_versions(const VersionAnswer& v) {
    return advance(StepEvidence(std::in_place_index<4>, v));
  }
  Result<StepOutcome> validate_positions(const PositionAnswer& p) {
    return advance(StepEvidence(std::in_place_index<5>, p));
  }
  Result<StepOutcome> await_mapping(const MappingAnswer& m) { return advance(StepEvidence(std::in_place_index<6>, m)); }
  Result<StepOutcome> freeze_snapshot(const SnapshotAnswer& s) {
    return advance(StepEvidence(std::in_place_index<7>, s));
  }
  Result<StepOutcome> execute(const ExecutionAnswer& e) { return advance(StepEvidence(std::in_place_index<8>, e)); }
  Result<StepOutcome> finish(const CompletionAnswer& c) { return advance(StepEvidence(std::in_place_index<9>, c)); }

  const ReuseRequest& request() const { return request_; }
  ReusePhase phase() const { return phase_; }
  ReuseStep next_step() const { return next_; }  // meaningful while open or executed
  const EvidenceTuple& evidence() const { return e_; }
  // The leases step 4 acquired (released again by step 10 or after a rejection).
  const std::vector<LeaseId>& acquired_leases() const { return leases_; }
  // The index's publication clock read at step 5 (0 before): a successor
  // finished at step 10 must be published after it.
  uint64_t read_publication_generation() const { return read_publication_generation_; }
  const std::optional<ReuseRejection>& rejection() const { return rejection_; }
  const std::optional<ExecutableReuseReceipt>& receipt() const { return receipt_; }
  const std::optional<ReuseCompletion>& completion() const { return completion_; }
  // Known once the attempt was rejected or executed (0x0CF counts it then).
  std::optional<FunnelOutcome> funnel_outcome() const;

  // Canonical digest of the step reached and every piece of evidence; a
  // rejected step or a typed error leaves it unchanged.
  Sha256Digest evidence_digest() const;
  // Re-derives the attempt's invariants (reuse_attempt_validate.cpp): the
  // evidence present is exactly what the steps passed own, E is mutually
  // consistent, the leases cover the candidate, the receipt is E's.
  Status validate() const;

 private:
  explicit ReuseAttempt(ReuseRequest r) : request_(std::move(r)) {}

  // One function per step (reuse_gate_steps.cpp: 1-5, reuse_use_steps.cpp:
  // 6-10). Each reads the evidence, and either returns a rejection or the
  // error without touching *this, or commits its part of the state.
  Result<StepOutcome> step_authorize(const AuthorizationAnswer& a);
  Result<StepOutcome> step_build_key(const KeyEvidence& k);
  Result<StepOutcome> step_lookup(const CandidateAnswer& c);
  Result<StepOutcome> step_acquire_leases(const LeaseAnswer& l);
  Result<StepOutcome> step_validate_versions(const VersionAnswer& v);
  Result<StepOutcome> step_validate_positions(const PositionAnswer& p);
  Result<StepOutcome> step_await_mapping(const MappingAnswer& m);
  Result<StepOutcome> step_freeze_snapshot(const SnapshotAnswer& s);
  Result<StepOutcome> step_execute(const ExecutionAnswer& x);
  Result<StepOutcome> step_finish(const CompletionAnswer& c);

  // Ends the attempt; leases_to_release = the held leases + `acquired_now`
  // (leases the rejected step itself obtained). The evidence is untouched.
  StepOutcome reject(ReuseStep step, RejectionReason reason, std::string detail,
                     const std::vector<LeaseId>& acquired_now = {});
  ExecutableReuseReceipt build_receipt() const;

  ReuseRequest request_;
  ReusePhase phase_ = ReusePhase::open;
  ReuseStep next_ = ReuseStep::authorize;
  EvidenceTuple e_;
  std::optional<NamespaceGrant> grant_;               // step 1
  std::vector<uint32_t> token_ids_;                   // step 2: the request's exact tokens
  std::optional<ReuseCandidate> candidate_;           // step 3
  bool witness_verified_ = false;                     // step 3
  std::vector<LeaseId> leases_;                       // step 4
  uint64_t read_publication_generation_ = 0;          // step 5: the index's publication clock
  std::optional<uint32_t> required_frontier_tokens_;  // step 7 [tokens]
  std::string kernel_abi_id_;                         // step 8
  std::optional<ExecutableReuseReceipt> receipt_;     // step 8
  std::optional<ReuseCompletion> completion_;         // step 10
  std::optional<ReuseRejection> rejection_;
};

}  // namespace kvrt
