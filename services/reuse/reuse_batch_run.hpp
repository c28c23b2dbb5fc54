#pragma once
// ReuseBatchRun: one ReuseBatch of the executable-reuse transaction (spec
// 0x0CD) on the node, as an explicit message sequence between the owners:
// acquire ops through steps 1-8 (a receipt's attempt then waits in
// OpenReuseAttempts), release ops through steps 9-10. Each op is a
// ReuseAttempt (services/reuse/); this class turns the owners' answers into
// that attempt's evidence, in the checked order, for all of the batch's ops
// at once:
//
//   stage      owner          steps  message                         answer
//   successor  index owner    10     PrefixBatch of the release ops' PrefixBatchReceipt (a publish
//                                    named successors (publish ops)  receipt or error per op)
//   release    allocator,     9, 10  the release ops' leases, split  released or not, per lease
//              radix index           by owner (lease_owner)
//   keys       authorization  1, 2   ReuseKeyRequest per open op     ReuseKeyAnswer
//   lookup     index owner    3      PrefixMatchOp per open op       CandidateReply
//   leases     allocator      4      ReuseLeaseRequest per open op   ReuseLeaseAnswer (+ step 5's pool part)
//   paths      radix index    4      ReusePathLeaseRequest per radix ReusePathLeaseAnswer
//                                    candidate whose blocks leased
//   versions   index owner    5-7    one per batch                   ReuseIndexVersion
//   mapping    mapper owner   7      SlotFrontierRequest per op      SlotFrontierReply
//                                    whose rows land in a slot
//   snapshot   executor       8      ReuseSnapshotRequest per op     SnapshotAnswer
//
// The caller (actors/reuse_actor.cpp, or a test driving the owners' cores
// directly) binds the run, then asks next() for the one request the run
// needs, sends it to the owner its type names, hands the answer back
// (answer(), or failed() when the owner did not answer), and repeats until
// next() answers nothing: the stage order above exists only in next(). A
// stage with no op left at it is skipped. An op leaves the sequence at its
// first rejection or error; the later stages never see it. When every stage
// has run, the leases of every op that ended without a receipt are listed
// for release (leases_to_release), and receipt() answers the worker.
//
// A radix candidate's leases are its blocks' (the allocator's) and one lock
// on its path (the radix owner's); the attempt sees one LeaseGrant covering
// both, or a refusal, and a path refused after the blocks were leased hands
// the block leases back.
//
// Step 6 is "not applicable" for the prefix index's candidates (0x0CD names
// it for declared modules and sessions). Step 7 depends on where the reused
// rows are dereferenced. Read in the paged pools, it reads no mapper: they
// are shared-memory segments mapped whole when the node starts (shm/), so
// every row of a leased block is mapped while the lease holds it, and the
// ready frontier is the leased bundles' rows. Copied into a request slot of
// the mapper owner (virtual reservations, 0x06: the op says so with
// await_slot_mapping), the kernel reads them there, so the mapper owner
// answers that slot's published frontier; short of the reused rows, the
// attempt ends as mapping_lag (0x0CF), not as an error.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "schema/prefix_types.hpp"
#include "schema/reuse_types.hpp"
#include "services/common/fault_points.hpp"
#include "services/reuse/open_reuse_attempts.hpp"
#include "services/reuse/reuse_attempt.hpp"
#include "services/reuse/reuse_step_answers.hpp"
#include "services/telemetry/reuse_funnel.hpp"

namespace kvrt {

// The request of each stage, named after what it asks of its owner.
struct SuccessorPublish {  // the index owner: the release ops' successors, as one PrefixBatch
  PrefixBatch batch;
};
struct BlockLeaseReturn {  // the allocator: the release ops' block leases
  std::vector<LeaseId> leases;
};
struct PathLeaseReturn {  // the radix index owner: the release ops' path leases
  std::vector<LeaseId> leases;
};
struct KeyLookup {  // the authorization owner: steps 1-2
  std::vector<ReuseKeyRequest> requests;
};
struct CandidateLookup {  // the index owner: step 3
  std::vector<PrefixMatchOp> lookups;
};
struct BlockLeaseAcquire {  // the allocator: steps 4-5
  std::vector<ReuseLeaseRequest> requests;
};
struct PathLeaseAcquire {  // the radix index owner: step 4's path locks
  std::vector<ReusePathLeaseRequest> requests;
};
struct IndexVersionRead {};  // the index owner: step 5, after the leases
struct SlotFrontierRead {    // the mapper owner: step 7 of ops whose rows land in a slot
  std::vector<SlotFrontierRequest> requests;
};
struct SnapshotFreeze {  // the executor: step 8
  std::vector<ReuseSnapshotRequest> requests;
};

class ReuseBatchRun {
 public:
  using Request = std::variant<SuccessorPublish, BlockLeaseReturn, PathLeaseReturn, KeyLookup, CandidateLookup,
                               BlockLeaseAcquire, PathLeaseAcquire, IndexVersionRead, SlotFrontierRead, SnapshotFreeze>;
  // node_pools: the node's pools and their generations (what a lookup reads
  // as g_pool); block_tokens: P of the paged layout; cache_groups: handles
  // per bundle.
  // faults: the reuse owner's fault points (a node run with [node]
  // fault_injection), or nullptr.
  ReuseBatchRun(ReuseBatch batch, std::vector<PoolGenerationRef> node_pools, uint32_t block_tokens,
                uint32_t cache_groups, FaultPoints* faults = nullptr);

  // The reuse owner's fault points: "after_<step>" for each of steps 1-8 of
  // an acquire op (after_authorize ... after_freeze_snapshot). One that
  // fires ends the op right after that step succeeded, with fault_injected,
  // and hands back every lease it had taken (0x04F: the owners' state is
  // then that of an attempt that never started). "after_execute" is a
  // release op's that names a successor: the worker reported step 9, and
  // step 10 releases the leases without publishing (successor_refused says
  // fault_injected).
  static std::vector<std::string> fault_point_names();

  // Leases by the owner that issued them.
  struct LeaseReturn {
    std::vector<LeaseId> blocks;  // the allocator's
    std::vector<LeaseId> paths;   // the radix index's (LeaseOwner::radix_index)
    bool empty() const { return blocks.empty() && paths.empty(); }
    void add(LeaseId l) { (lease_owner(l) == LeaseOwner::radix_index ? paths : blocks).push_back(l); }
  };

  // Before any stage: each release op takes its attempt out of `open` (an
  // unknown one answers a typed error), and acquire ops beyond the room
  // `open` has left for the session answer a typed error. A release op whose
  // successor cannot be one (work not executed, blocks short of the reused
  // rows or of its tokens) answers invalid_argument and its attempt stays open.
  void bind(OpenReuseAttempts& open, SessionId session);

  // The next stage's request; nothing once every stage has run. Call after
  // bind(), and once per answer.
  std::optional<Request> next();
  // The answer of the stage next() asked for (its type names the stage:
  // flags answer either lease return).
  void answer(const Result<PrefixBatchReceipt>& published);
  void answer(std::vector<uint8_t> released);
  void answer(const std::vector<ReuseKeyAnswer>& keys);
  void answer(const std::vector<CandidateReply>& candidates);
  void answer(const std::vector<ReuseLeaseAnswer>& leases);
  void answer(const std::vector<ReusePathLeaseAnswer>& paths);
  void answer(const ReuseIndexVersion& version);
  void answer(const std::vector<SlotFrontierReply>& frontiers);
  void answer(const std::vector<SnapshotAnswer>& snapshots);
  // The owner of the stage next() asked for did not answer.
  void failed(const Error& e);

  // Leases held by ops that ended without a receipt: the caller releases
  // them (ReleaseLeaseOp under the session) before it answers.
  LeaseReturn leases_to_release() const;
  // Every lease the run holds, receipts' included: what goes back when the
  // session ended while the run was in flight (no worker will release them).
  LeaseReturn all_leases() const;
  // One outcome per op; an op that no stage answered (a caller that stopped
  // early) is an Error.
  ReuseBatchReceipt receipt() const;
  // The attempts that ended in this batch, for the node's funnel (0x0CF):
  // an acquire's rejection, or a release's step 9 (executed: hit; not:
  // execution_failed). A receipt is not an end: its attempt is counted when
  // it is released. Errors are not funnel outcomes.
  std::vector<FunnelOutcome> funnel_outcomes() const;
  // Moves out the attempts that produced receipts, for OpenReuseAttempts.
  std::vector<ReuseAttempt> take_receipt_attempts();

  const TraceContext& trace() const { return batch_.trace; }

 private:
  // The stages, in the order next() walks them: each builds its requests
  // (recording which ops they are for) and takes their answers.
  // Step 10's successors, before the leases go back: one publish op per
  // release op that names a successor, in the attempt's namespace, sent as
  // one PrefixBatch under the session (the index owner's own checks apply).
  // Answered with the batch's receipt, or the error that replaced it.
  std::vector<PrefixOp> successor_requests();
  void on_successors(const Result<PrefixBatchReceipt>& published);

  // The release ops' attempts' leases; answered with one flag per lease of
  // each list (1: released, 0: the owner held no such lease for the
  // session). Then step 9 (the op's execution report) and step 10 (the
  // leases released) run on each attempt.
  LeaseReturn release_requests();
  void on_released(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& paths);

  std::vector<ReuseKeyRequest> key_requests();
  void on_keys(const std::vector<ReuseKeyAnswer>& answers);

  std::vector<PrefixMatchOp> candidate_requests();
  void on_candidates(const std::vector<CandidateReply>& answers);

  std::vector<ReuseLeaseRequest> lease_requests();
  void on_leases(const std::vector<ReuseLeaseAnswer>& answers);

  std::vector<ReusePathLeaseRequest> path_lease_requests();
  void on_path_leases(const std::vector<ReusePathLeaseAnswer>& answers);

  // How many ops wait for the index version (0: the versions stage is skipped).
  size_t version_requests();
  void on_index_version(const ReuseIndexVersion& version);

  std::vector<SlotFrontierRequest> frontier_requests();
  void on_frontiers(const std::vector<SlotFrontierReply>& answers);

  std::vector<ReuseSnapshotRequest> snapshot_requests();
  void on_snapshots(const std::vector<SnapshotAnswer>& answers);

  // The owner of the last stage did not answer (a transport error): every op
  // that stage was for ends with `e`.
  void on_stage_failed(const Error& e);

  struct OpRun {
    std::optional<ReuseAttempt> attempt;
    std::optional<ReuseOutcome> outcome;  // set when the op's sequence ended
    std::vector<LeaseId> release;         // leases to release when it ended without a receipt
    std::optional<ReuseCandidate> candidate;
    std::string planned_abi;                 // the consumer key's cache ABI
    ReuseLeaseAnswer leased;                 // step 4's answer, whose pool part step 5 reads
    std::vector<LeaseId> pending;            // block leases granted while the path lease is awaited
    std::optional<FunnelOutcome> ended;      // a release op's step 9
    std::optional<PrefixOutcome> successor;  // a release op's publication (receipt or error)
  };
  const ReuseAcquireOp& acquire_op(size_t i) const;
  // Indices of the ops whose next step is `step`, recorded for the answers.
  std::vector<size_t> open_at(ReuseStep step);
  // Hands op i's combined lease answer to its attempt.
  void acquire(size_t i, const LeaseAnswer& answer, const std::vector<LeaseId>& give_back);
  // Applies one step's result to op i: a rejection or an error ends it.
  void settle(size_t i, const Result<StepOutcome>& step);
  void end_with_error(size_t i, Error e);

  // The stage order of 0x0CD as next() walks it.
  enum class Stage : uint8_t {
    successors,
    release_blocks,
    release_paths,
    keys,
    candidates,
    leases,
    paths,
    versions,
    mapping,
    snapshots,
    done
  };
  // The release stage asks two owners in turn; their flags and failure.
  struct ReleaseRound {
    LeaseReturn leases;
    std::vector<uint8_t> blocks, paths;
    std::optional<Error> failed;
  };
  void settle_release();

  Stage stage_at_ = Stage::successors;
  bool asked_ = false;  // next() handed out the current stage's request
  ReleaseRound release_round_;
  ReuseBatch batch_;
  std::vector<PoolGenerationRef> node_pools_;
  uint32_t block_tokens_ = 0;
  uint32_t cache_groups_ = 0;
  FaultPoints* faults_ = nullptr;
  std::vector<OpRun> ops_;
  std::vector<size_t> stage_;  // the ops the last request list was for
};

}  // namespace kvrt
