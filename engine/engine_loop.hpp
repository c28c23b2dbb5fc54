#pragma once
// The engine loop of one `kvrt run` worker, private to
// actors/engine_*.cpp: the scheduler state and its steps. The public entry
// point is run_engine_worker() in engine_worker.hpp.
//
//   1. admission: cache-aware choice of ready requests, one reuse message
//      (the node's executable-reuse transaction, 0x0CD)
//   2. allocation with the receipts' blocks              (engine_admission.cpp)
//   3. prefill, commit, early publication, forks
//   4. one decode row per live request                   (engine_decode.cpp)
//   5. verification, publication, release, next turn
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "actors/client.hpp"
#include "engine/engine_session.hpp"
#include "engine/engine_worker.hpp"
#include "engine/first_block_seeds.hpp"
#include "engine/model/declared_prompt_rows.hpp"
#include "engine/model/model_variants.hpp"
#include "engine/pending_request.hpp"

namespace kvrt::engine {

class EngineLoop {
 public:
  EngineLoop(EngineSession& session, const model::ReferenceModel& model, model::ModelKvCache& shared,
             const EngineOptions& o, std::vector<const workload::Job*> jobs);
  Result<EngineResult> run();
  // A new node to serve through after a lost session: its session and its
  // pools as a model cache, or an error while none can be reached. Without
  // one, the rest of the share is served privately.
  using Rebind = std::function<Result<std::pair<EngineSession*, model::ModelKvCache*>>()>;
  void set_rebind(Rebind rebind) { rebind_ = std::move(rebind); }
  const ReuseFunnel& funnel() const { return funnel_; }

 private:
  // A namespace as this worker's latest grant for it described it.
  struct NamespaceView {
    NamespaceGeneration generation;
    const model::ReferenceModel* model = nullptr;  // the generation's weights
    std::string adapter;                           // its active adapter set; empty: none
  };
  struct LiveRequest {
    const workload::Job* job = nullptr;
    uint32_t turn = 0;
    uint32_t branch = 0;          // fork branch; 0 = the request that was prefilled
    std::vector<TokenId> tokens;  // prompt, then generated
    // A templated prompt's position ids, one per token (0x0CB), extended as
    // tokens are generated; empty: every token at its row.
    std::vector<uint32_t> positions;
    uint32_t prompt_tokens = 0;
    uint32_t decode_target = 0;          // tokens to generate [tokens]
    uint32_t hit_tokens = 0;             // prompt rows reused from the index [rows]
    uint32_t resumed_rows = 0;           // prompt rows after the hit loaded from the session tier [rows]
    uint32_t cached_rows = 0;            // committed rows [rows]
    uint32_t generated = 0;              // [tokens]
    uint32_t published_blocks = 0;       // blocks [0, published_blocks) are in the index [blocks]
    uint32_t exact_rows = 0;             // rows [0, exact_rows) are bitwise what a no-reuse run computes [rows]
    bool shared_prefix_decoded = false;  // some decode row came from shared-prefix execution
    bool failed = false;                 // a typed error ended it; released, not verified
    // With a staged cache: rows [0, staged_rows) are the same in the host
    // copy and in the pools. A table entry the node replaces (a
    // copy-on-write copy) moves it back to that block's first row.
    uint32_t staged_rows = 0;
    // What the request was admitted under: its namespace's view then (the
    // worker's latest grant). It computes, and is verified, with that
    // generation's weights to the end, and its rows are published only into
    // that generation (0x01A, 0x0CE).
    NamespaceView admitted;
    const model::ReferenceModel& weights() const { return *admitted.model; }
    // The reuse receipt whose blocks this request took, until the prefill
    // decides how its attempt ends (0x0CD step 10: plain release, or this
    // request's prompt blocks published as the attempt's successor).
    std::optional<ExecutionSnapshotVersion> reuse_snapshot;
    RequestFence fence;
    model::SequenceBlocks blocks;  // slots[g][j]
    // A templated prompt (0x0CB): its segments in storage order, and which
    // were reused modules (1) rather than computed.
    std::vector<model::DeclaredSegmentRows> segments;
    std::vector<uint8_t> reused_segments;
  };
  // The weights a new request of the namespace computes with: its view's
  // (the base before any grant, on the private path).
  const model::ReferenceModel& current_model(const std::string& namespace_name) const;
  // The request's identity extras for the index owners: its adapter.
  static RequestIdentity identity_of(const std::string& adapter);
  // forward() of chunks whose requests may run on different weights: one
  // batched call per model, the logits in the chunks' order.
  Result<std::vector<std::vector<float>>> forward_by_model(std::span<const model::ForwardChunk> chunks,
                                                           std::span<const model::ReferenceModel* const> models);

  // A staged cache (engine/staged_model_kv_cache.hpp; nothing to move
  // otherwise): rows [r.staged_rows, end) of the request's table loaded from
  // the pools into the host copy before the model reads them, or stored from
  // the copy into the pools before they are committed; either way
  // r.staged_rows becomes end. stage_rows moves the rows of any table.
  Status load_staged(LiveRequest& r, uint32_t end);
  Status store_staged(LiveRequest& r, uint32_t end);
  Status stage_rows(bool load, const model::SequenceBlocks& blocks, uint32_t begin, uint32_t end);

  // The session tier (EngineOptions::session_tier, 0x0CC): a chat turn
  // whose conversation goes on saves its history when it ends; the next
  // turn, admitted, loads the saved rows past its hit into its own blocks.
  Status resume_sessions(std::vector<LiveRequest>& admitted);
  Status save_sessions(const std::vector<LiveRequest>& done);
  static std::string session_label(const LiveRequest& r);

  // engine_loop.cpp: the loop, the job queue and the calls to the node.
  uint64_t progress_marker() const;
  void enqueue_job(const workload::Job& job);
  TraceContext next_trace();
  void note_error(const Error& e);
  // Times every round trip of `session` into the result, by owner.
  void observe_calls(EngineSession& session);
  // What the ends of reuse attempts sent so far answered (0x0CD steps 9-10),
  // into the result's errors.
  void take_end_notes();
  // The attempts ended so far, sent alone (EngineSession::flush_reuse_ends).
  Status release_receipts();
  Status publish_batch(const PrefixBatch& publish);
  Status authorize_namespaces();
  // An op refused because an invalidation ended this worker's grants
  // (0x01A): not an error. The namespaces are authorized again before the
  // next admission, and the requests go on without reuse meanwhile.
  void note_stale_generation();
  Status reauthorize_if_stale();
  Status apply_entries(LiveRequest& r, const std::vector<TableEntryUpdate>& entries);
  void verify(const LiveRequest& r);
  // engine_templated.cpp: templated prompts (Prompt Cache, 0x0CB), admitted
  // through the node's assembly instead of the prefix reuse transaction.
  // admit_templated answers false when the pools had no room (requeued).
  Status register_prompt_schemas(const std::set<std::string>& namespaces);
  Status register_prompt_schema(const workload::TemplatedSchema& schema);
  std::map<std::pair<std::string, std::string>, uint64_t> schema_generations_;  // (namespace, schema id) registered
  Result<bool> admit_templated(const PendingRequest& p);
  Status compute_module(LiveRequest& r, size_t segment, bool publish);
  // A prompt route's error: the lost session's is returned, a refusal noted.
  Status error_of_prompt_call(const Error& e);
  // engine_admission.cpp: steps 1-3.
  Status admit();
  Status prefill(std::vector<LiveRequest>& admitted, std::vector<PendingRequest>& sources);
  // engine_decode.cpp: steps 4-5.
  Status decode_step();
  Result<std::vector<std::vector<float>>> decode_rows(const std::vector<LiveRequest*>& writing);
  // engine_node_decode.cpp: writing[members] (same weights, a shared first
  // block) decoded through the node's executor owner. Empty when the node
  // refused the op with a typed error (noted; the caller decodes them here);
  // an error of the round trip itself (node lost) is the Result's.
  Result<std::optional<std::vector<std::vector<float>>>> decode_on_node(const model::ReferenceModel& model,
                                                                        const std::vector<LiveRequest*>& writing,
                                                                        const std::vector<size_t>& members);
  // Every live request has waited kPreemptAfterStalledSteps decode steps in
  // a row for a block (the pool or its namespace's quota is full): one is
  // released as preempted (0x05E) and served again from its prompt, so that
  // the others can go on. Recompute preemption, as engines do under memory
  // pressure; without it a quota smaller than the live requests' next
  // blocks would stall the worker for good.
  Status preempt_one();
  uint32_t preempt_after_steps() const;
  static constexpr uint32_t kPreemptAfterStalledSteps = 16;
  static constexpr uint32_t kMaxPreemptions = 8;  // per request (job, turn)
  uint32_t stalled_decode_steps_ = 0;
  bool admission_held_ = false;  // a preemption holds admission until a live request finished
  // Requests one admission round may start. Each new request's reuse
  // attempt leases its hit's blocks until the allocation settles, so a
  // round of several requests whose hits together pin nearly the whole pool
  // can leave each allocation without room for its own suffix, round after
  // round, with nothing live to finish and free a block (a livelock, not a
  // full pool). A round in which every allocation was refused for room
  // halves the next round's size, down to one; a round that admits one
  // restores it.
  uint32_t admission_round_cap_ = UINT32_MAX;
  std::map<std::pair<const workload::Job*, uint32_t>, uint32_t> preemptions_;
  Status finish();
  // engine_private.cpp: a lost session. Everything of this worker's share
  // that did not finish goes back to the queue, which is served on the
  // private path until a node can be reached again (rebind), then through
  // that node.
  Status recover(const Error& lost);
  Status requeue_unfinished();
  Status serve_pending_privately(const PendingRequest& p);
  Status ensure_private_cache();
  // What of this worker's share finished through the node: by job, the
  // (turn, branch) pairs, and a chat job's latest history.
  struct Finished {
    std::set<std::pair<uint32_t, uint32_t>> requests;
    std::vector<TokenId> history;
  };
  std::map<const workload::Job*, Finished> finished_;

  EngineSession* session_;              // replaced when the engine reconnects to a new node
  const model::ReferenceModel& model_;  // the base weights
  model::ModelVariants variants_;       // the weights of every generation seen
  std::map<std::string, NamespaceView> views_;
  model::ModelKvCache* shared_;  // the node's pools, as its model cache (replaced with them)
  const EngineOptions& o_;
  std::vector<const workload::Job*> jobs_;
  uint32_t P_, groups_;
  uint64_t row_bytes_;
  FirstBlockSeeds seeds_;
  bool grants_stale_ = false;  // note_stale_generation since the last authorization
  std::deque<PendingRequest> ready_;
  std::vector<LiveRequest> live_;
  EngineResult result_;
  ReuseFunnel funnel_;  // one record per reuse attempt whose allocation settled (0x0CF)
  std::unique_ptr<model::LocalModelKvCache> replay_cache_;
  Rebind rebind_;
  uint64_t span_ = 0, failed_requests_ = 0;
};

}  // namespace kvrt::engine
