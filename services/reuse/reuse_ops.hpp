#pragma once
// The executable-reuse transaction's wire operations (issue 5; spec 0x0CD).
//
// A worker sends one ReuseBatch per scheduler iteration: one ReuseAcquireOp
// per new request, and one ReuseReleaseOp per receipt it is done with. The
// node runs steps 1-8 of 0x0CD for every acquire as an explicit message
// sequence between its owners (authorization -> index -> allocator [->
// radix path] -> index -> executor, one message per owner per step for the
// whole batch; actors/reuse_actor.cpp) and answers one outcome per op:
//   - ExecutableReuseReceipt: the use gate held. Its leases belong to the
//     session and its attempt stays open on the node; the worker takes the
//     blocks into its request's own references (AllocateOp with the
//     receipt's handles) and later ends the attempt with a ReuseReleaseOp.
//     A session's end drops its open attempts; the owners reclaim the leases.
//   - ReuseRejectionReceipt: the attempt ended at one step, for one reason,
//     in one funnel bucket (0x0CF). Any lease it took is already released.
//     The request falls back to recomputation (0x0CG): reuse lost, exactness
//     kept.
//   - Error: the op itself is malformed (empty namespace or tokens).
// A ReuseReleaseOp ends one receipt's attempt: the worker reports whether
// the work that read the reused rows ran (step 9), and the node hands each
// of the attempt's leases back to the owner that issued it (step 10: block
// leases to the allocator, radix path leases to the radix index). An
// attempt the session does not hold open (unknown, another session's, or
// already released) answers a typed error and nothing changes.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "services/common/error.hpp"
#include "services/common/ids.hpp"
#include "services/prefix/prefix_ops.hpp"
#include "services/common/trace_context.hpp"
#include "services/reuse/executable_reuse_receipt.hpp"
#include "services/reuse/reuse_evidence.hpp"
#include "services/telemetry/reuse_rejection.hpp"

namespace kvrt {

struct ReuseAcquireOp {
  std::string namespace_name;  // the cache namespace to reuse from
  RequestId request;           // receipt provenance (0 before allocation)
  RequestGeneration request_generation;
  std::vector<TokenId> tokens;  // the prompt, S_prompt tokens
  LogitsPath logits_path = LogitsPath::logits_required;
  bool require_collision_witness = false;  // step 3 policy (0x07F)
  friend bool operator==(const ReuseAcquireOp&, const ReuseAcquireOp&) = default;
};

struct ReuseRejectionReceipt {
  ReuseStep step = ReuseStep::authorize;
  RejectionReason reason = RejectionReason::no_candidate;
  std::string detail;                    // operands; never tokens or salts
  std::vector<LeaseId> leases_released;  // leases the attempt took and the node released
  ReuseBucket bucket() const { return bucket_of(reason); }
  friend bool operator==(const ReuseRejectionReceipt&, const ReuseRejectionReceipt&) = default;
};

// Step 10's other ending (0x0CD: "release leases, or publish one complete
// COW successor atomically"): the request that read the reused rows
// committed rows after them, and its full blocks [0, end_block) become
// visible in the attempt's own namespace, in one publication covering every
// cache group, before the attempt's leases go back. The publication is the
// index owner's ordinary one under the session (the request must be the
// session's, its rows committed); a refused one publishes nothing.
struct ReuseSuccessor {
  RequestId request;
  std::vector<TokenId> tokens;  // the request's tokens from position 0
  uint32_t end_block = 0;       // one past the last published block [blocks]
  friend bool operator==(const ReuseSuccessor&, const ReuseSuccessor&) = default;
};

// Steps 9-10 for one receipt: whether the work that read its rows ran (the
// worker's execution report, step 9), then, when a successor is named, its
// publication, then every lease of the attempt goes back to the owner that
// issued it (step 10). The attempt is named by its receipt's
// execution_snapshot_version, unique on the node. A successor needs
// executed = true (work that did not run produced nothing to publish).
struct ReuseReleaseOp {
  ExecutionSnapshotVersion snapshot;
  bool executed = true;
  std::optional<ReuseSuccessor> successor = std::nullopt;
  friend bool operator==(const ReuseReleaseOp&, const ReuseReleaseOp&) = default;
};

struct ReuseReleaseReceipt {
  ExecutionSnapshotVersion snapshot;  // the attempt
  std::vector<LeaseId> released;      // handed back to their owners
  std::vector<LeaseId> refused;       // an owner no longer held them for the session
  bool completed = false;             // the attempt passed steps 9 and 10 (counted as executed, 0x0CF)
  // A named successor: the index's publication receipt (published_successor:
  // it made new entries visible after what the attempt read) or why nothing
  // was published. Either way the leases went back.
  std::optional<PrefixPublishReceipt> successor = std::nullopt;
  std::optional<Error> successor_refused = std::nullopt;
  bool published_successor = false;  // step 10 ended as a published successor
  friend bool operator==(const ReuseReleaseReceipt&, const ReuseReleaseReceipt&) = default;
};

using ReuseOp = std::variant<ReuseAcquireOp, ReuseReleaseOp>;
using ReuseOutcome = std::variant<Error, ExecutableReuseReceipt, ReuseRejectionReceipt, ReuseReleaseReceipt>;

struct ReuseBatch {
  TraceContext trace;
  std::vector<ReuseOp> ops;
  friend bool operator==(const ReuseBatch&, const ReuseBatch&) = default;
};

struct ReuseBatchReceipt {
  TraceContext trace;
  std::vector<ReuseOutcome> outcomes;  // outcomes[i] answers ops[i]
  friend bool operator==(const ReuseBatchReceipt&, const ReuseBatchReceipt&) = default;
};

}  // namespace kvrt
