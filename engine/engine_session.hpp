#pragma once
// The engine-facing session: what an inference engine's scheduler asks of a
// node, a call per scheduler step, above kvrt::Client's per-owner batches.
// `kvrt worker` and `kvrt run`'s engines go through it, and so will the C
// ABI and the Python package built on it.
//
// The part every engine otherwise rewrites is the life of an
// executable-reuse receipt (0x0CD): admission sends one reuse message for a
// batch of new requests (steps 1-8: authorization before lookup, candidate,
// leases, versions, snapshot), then one allocation that takes each
// receipt's blocks; each receipt must later be ended (steps 9-10: executed
// or not, optionally naming the request's own full prompt blocks as the
// attempt's copy-on-write successor), and those ends travel at the head of
// the next reuse message. The session keeps that queue: end_reuse() queues,
// admit() and flush_reuse_ends() send, and take_reuse_end_notes() hands the
// outcomes back for the engine's counters.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "actors/client.hpp"

namespace kvrt {

// One new request at admission.
struct AdmissionRequest {
  std::string namespace_name;   // a namespace this session's principal was granted
  std::vector<TokenId> tokens;  // the prompt [tokens]
  RequestIdentity identity;     // adapter, multimodal inputs, cache salt (0x07B)
  LogitsPath logits_path = LogitsPath::logits_required;
  // Virtual reservations (0x06): the mapper's request id of the slot this
  // session bound for the request. The hit's rows are copied there and read
  // there, so the node's step 7 checks that slot's published frontier
  // covers them (short: a mapping_lag rejection, 0x0CF). None: the rows are
  // read in the paged pools.
  std::optional<RequestId> slot_request;
};

// A request the scheduler asks the radix owner about (EngineSession::handoff).
struct HandoffRequest {
  AdmissionRequest ask;
  RequestId request;                     // the engine's id for it: the lease is this request's
  uint32_t free_private_tail_slots = 0;  // writable rows it owns already (a resumed request) [rows]
};

// What admission answered for one request: its reuse attempt, then its
// allocation. Exactly one of `allocation` and `allocation_error` is set.
struct Admission {
  // Reuse: a hit (its blocks leased to this session, then taken by the
  // allocation), the node's rejection receipt (no usable hit, and why), or
  // a typed error of the attempt; none when reuse was not asked.
  std::optional<ExecutableReuseReceipt> hit;
  std::optional<ReuseRejectionReceipt> rejection;
  std::optional<Error> reuse_error;
  // The allocation: committed (the request holds its blocks), or refused
  // without any change (rolled_back, out_of_capacity, quota_exceeded).
  std::optional<AllocationReceipt> allocation;
  std::optional<Error> allocation_error;

  bool admitted() const { return allocation && allocation->outcome == AllocationOutcome::committed; }
  // Prompt rows served by the hit [rows]; 0 without one.
  uint32_t hit_tokens() const { return hit ? hit->covered_interval.end : 0; }
  // The attempt to end with end_reuse() once the prefill has read its rows:
  // set only for an admitted request with a hit (an attempt whose blocks
  // the allocation did not take is ended, unexecuted, by the session).
  std::optional<ExecutionSnapshotVersion> reuse_attempt() const {
    if (!hit || !admitted()) return std::nullopt;
    return hit->execution_snapshot_version;
  }
  // The allocation refused the hit's blocks because a purge revoked the
  // receipt in between (the blocks are gone): serve the request again.
  bool hit_withdrawn() const;
  RequestFence fence() const {
    return allocation
               ? RequestFence{allocation->request_id, allocation->request_generation, allocation->table_version_after}
               : RequestFence{};
  }
};

// What the ends of reuse attempts sent since the last take answered: how
// many published their successor, and every error (an op refused, a
// successor the index refused, leases an owner no longer held), for the
// engine to classify.
struct ReuseEndNotes {
  uint64_t ended = 0;
  uint64_t successors_published = 0;
  std::vector<Error> errors;
};

// Receipt latency of one round trip, by owner, for an engine's report.
using CallObserver = std::function<void(Owner owner, double micros)>;

class EngineSession {
 public:
  // Opens a session on the node (ClientOptions says how: channel-only,
  // timeouts, trace). The pools are attached by the caller
  // (engine/session_pools.hpp) from client().
  static Result<std::unique_ptr<EngineSession>> connect(const NodeDescriptor& node, const std::string& token_hex,
                                                        const ClientOptions& options);
  explicit EngineSession(std::unique_ptr<Client> client);

  Client& client() { return *client_; }
  const SessionReceipt& session() const { return client_->session(); }
  uint32_t block_tokens() const { return session().block_tokens; }
  void set_call_observer(CallObserver observer) { observer_ = std::move(observer); }

  Result<NamespaceGrantReceipt> authorize(const std::string& namespace_name, const TraceContext& trace);

  // Steps 1-2 of a scheduler iteration for `requests`: with `reuse`, one
  // reuse message (the queued ends first) and then one allocation of every
  // prompt with its hit's blocks; without, the allocation alone. A hit
  // ending inside a block (the immutable partial-tail policy, 0x07D) has
  // that block's rows copied into the request's own. Answers in request
  // order; an error of the round trip itself (node lost, session ended,
  // a reply of another size) is the Result's.
  Result<std::vector<Admission>> admit(std::span<const AdmissionRequest> requests, bool reuse,
                                       const TraceContext& reuse_trace, const TraceContext& allocation_trace);

  // How much of each prompt the namespace's index holds now, changing
  // nothing on the node (a PrefixPeekOp per request, one prefix message):
  // no lease, no recency, no reuse funnel count. The receipt's
  // runtime_hit_tokens is what an admission would reuse if nothing changes
  // in between and the reuse owner's gates pass (0x0CD: admission can still
  // reject, a peek is not a reservation). Per request: its receipt, or its
  // typed error (a namespace not granted, a bad identity).
  Result<std::vector<Result<PrefixMatchReceipt>>> lookup(std::span<const AdmissionRequest> requests,
                                                         const TraceContext& trace);

  // The scheduler handoff (0x08G), on a node whose prefix index is the radix
  // tree: per request, its match frozen into a RadixSchedulerHandoffReceipt
  // whose path stays locked (0x08D) while the scheduler decides. Each hit's
  // receipt must then be disposed of (dispose_handoffs): admitted, which
  // checks it is not stale and keeps the lock until it is released once the
  // admission holds its blocks, or released when the request is rejected or
  // deferred. A session's end releases what is left. Per request: its
  // receipt or typed error (a hash-chain node: invalid_argument).
  Result<std::vector<Result<RadixSchedulerHandoffReceipt>>> handoff(std::span<const HandoffRequest> requests,
                                                                    const TraceContext& trace);
  Result<std::vector<Result<HandoffDispositionReceipt>>> dispose_handoffs(
      std::span<const PrefixHandoffDispositionOp> dispositions, const TraceContext& trace);

  // Inactive sessions (0x0CC), on a node with a [tier]: save a
  // conversation's history [0, H) (its tokens and every cache group's
  // canonical rows) when it goes inactive, and resume it with the next
  // turn's whole prompt: the receipt's rows are the history's only while the
  // node's identity of it (tenant, namespace generation, model and identity
  // extras, layout, position contract) still holds; otherwise a refusal, and
  // the turn recomputes. Errors: the authorization's, the tier's, the
  // round trip's.
  Result<SessionSaveReceipt> save_session(const SessionSaveRequest& request);
  Result<SessionResumeReceipt> resume_session(const SessionResumeRequest& request);

  // Prompt Cache (0x0CB): register a namespace's prompt schema; assemble a
  // prompt written against it (each module reused, with the session's
  // leases on its blocks, or a miss with its reason, at its declared
  // positions); publish a module this session computed alone at its
  // declared positions in a request of its own (rows [0, N) committed).
  // The leases of a reused module go back with the allocator's
  // ReleaseLeaseOp once its rows are copied (the session's end returns what
  // is left). Errors: the authorization's, the schema's, the assembly's
  // (stale_generation, invalid_argument naming the item), the round trip's.
  Result<PromptSchemaReceipt> register_prompt_schema(const PromptSchemaRequest& request);
  Result<PromptAssemblyReceipt> assemble_prompt(const PromptAssembleRequest& request);
  Result<PromptModulePublishReceipt> publish_prompt_module(const PromptModulePublishRequest& request);

  // Steps 9-10 of an admitted request's attempt, queued for the next reuse
  // message: `executed` when the work that read the reused rows ran; a
  // successor (the request's committed full prompt blocks, 0x0CD step 10)
  // needs `executed`. A request named as a successor must hold its blocks
  // until the end is sent (successor_pending, flush_reuse_ends).
  void end_reuse(ExecutionSnapshotVersion attempt, bool executed, std::optional<ReuseSuccessor> successor);
  bool successor_pending(RequestId request) const { return pending_successors_.contains(request.value); }
  bool reuse_ends_pending() const { return !pending_ends_.empty(); }
  // Sends the queued ends now, alone.
  Status flush_reuse_ends(const TraceContext& trace);
  // The session is lost (node_lost, session_ended): its attempts went with
  // the node, or the node reclaimed them; nothing queued is sent.
  void abandon_reuse_ends() {
    pending_ends_.clear();
    pending_successors_.clear();
  }
  ReuseEndNotes take_reuse_end_notes();

  // The steps between admission and the end: commits, appends, forks,
  // releases (the allocator), publications (the prefix index).
  Result<AllocatorBatchReceipt> allocator(const AllocatorBatch& batch);
  Result<PrefixBatchReceipt> prefix(const PrefixBatch& batch);
  // Attention executed by the node over the session's own requests
  // (shared-prefix decode through the executor owner).
  Result<ExecuteBatchReceipt> executor(const ExecuteBatch& batch);
  // The mapper owner's slots (virtual reservations, 0x06). A receipt that
  // does not answer every op is invariant_violated.
  Result<MapperBatchReceipt> mapper(const MapperBatch& batch);

 private:
  template <class Request>
  Result<receipt_of<Request>> timed(Owner owner, const Request& request);
  // One prefix message of `batch`; each op's outcome as a T or its typed
  // error (an outcome of another kind is rpc_failed for the whole call).
  template <class T>
  Result<std::vector<Result<T>>> per_op(const PrefixBatch& batch);
  // Moves the queued ends to the head of `batch`; returns how many.
  size_t take_ends(ReuseBatch& batch);
  // The answers to `ends` ends at the head of a reuse receipt, into notes_.
  Status note_ends(const ReuseBatchReceipt& receipt, size_t ends);

  std::unique_ptr<Client> client_;
  CallObserver observer_;
  std::vector<ReuseReleaseOp> pending_ends_;
  std::set<uint64_t> pending_successors_;  // requests named by a queued end
  ReuseEndNotes notes_;
};

}  // namespace kvrt
