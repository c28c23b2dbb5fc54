#include "engine/worker_runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>

#include "actors/client.hpp"
#include "engine/engine_session.hpp"
#include "engine/session_pools.hpp"
#include "engine/session_reuse_policy.hpp"
#include "engine/worker_slots.hpp"
#include "services/common/splitmix64.hpp"
#include "services/identity/layout_loader.hpp"
#include "services/telemetry/reuse_rejection.hpp"
#include "tools/report/run_report.hpp"

namespace kvrt {

namespace {

// The K/V row of position t depends on every token up to t (as a
// transformer's does), through a running hash of the prefix.
std::vector<uint64_t> prefix_hashes(const std::vector<TokenId>& tokens) {
  std::vector<uint64_t> h(tokens.size());
  uint64_t acc = 0x6b7672742d6b76ull;
  for (size_t t = 0; t < tokens.size(); ++t) {
    acc = splitmix64(acc ^ (static_cast<uint64_t>(static_cast<uint32_t>(tokens[t])) << 1) ^ (t << 40));
    h[t] = acc;
  }
  return h;
}

void fill_row(uint64_t prefix_hash, uint32_t group, std::span<uint8_t> row) {
  for (size_t i = 0; i < row.size(); i += 8) {
    const uint64_t v = splitmix64(prefix_hash ^ (uint64_t{group} << 56) ^ i);
    std::memcpy(row.data() + i, &v, std::min<size_t>(8, row.size() - i));
  }
}

struct LiveRequest {
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  uint32_t prompt_tokens = 0;
  uint32_t hit_tokens = 0;
  RequestFence fence;
  std::vector<std::vector<PhysicalBlockHandle>> table;     // [group][logical block]
  std::optional<ExecutionSnapshotVersion> reuse_snapshot;  // the reuse receipt's attempt, if a hit
  bool successor = false;  // its full prompt blocks were named as that attempt's successor
  uint32_t decoded = 0;
  std::optional<WorkerSlots::Slot> slot;  // virtual reservations: where its rows live
};

// Nearest-rank percentiles, as every kvrt report defines them (all 0 when
// there are no samples).
CallLatency percentiles(const std::vector<double>& us) {
  return CallLatency{report::percentile(us, 50), report::percentile(us, 99), report::percentile(us, 100)};
}

class Worker {
 public:
  // `slots`: the mapper owner's request slots (virtual reservations), or
  // null to serve every row from the block pools.
  Worker(EngineSession& session, shm::SharedPoolStore& store, WorkerSlots* slots, const WorkerOptions& o,
         std::string ns)
      : session_(session),
        store_(store),
        slots_(slots),
        o_(o),
        namespace_(std::move(ns)),
        rng_(o.seed),
        groups_(store.group_count()),
        P_(store.block_tokens()) {
    session_.set_call_observer([this](Owner owner, double micros) { record_call(owner, micros); });
    std::mt19937_64 shared(o.workload_seed);
    for (uint32_t s = 0; s < o.system_prompts; ++s) {
      std::vector<TokenId> p(o.system_prompt_tokens);
      for (TokenId& t : p) t = static_cast<TokenId>(shared() % 32000);
      system_prompts_.push_back(std::move(p));
    }
  }

  WorkerSummary run() {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(o_.duration_s));
    std::vector<LiveRequest> live;
    while (!summary_.stopped_by) {
      reauthorize_if_stale();
      const bool may_start =
          std::chrono::steady_clock::now() < deadline && (o_.max_requests == 0 || started_ < o_.max_requests);
      if (may_start) admit(live);
      if (live.empty()) {
        if (!may_start) break;
        continue;
      }
      decode_step(live);
      finish(live);
      ++iteration_;
    }
    if (!summary_.stopped_by) release_receipts();
    if (slots_ != nullptr) {
      if (!summary_.stopped_by)
        if (Status freed = slots_->flush(next_trace()); !freed.ok()) note_error(freed.error());
      const WorkerSlots::Counts& c = slots_->counts();
      summary_.physical_mode = "virtual_pages";
      summary_.mapper_steps = c.steps;
      summary_.mapper_steps_short = c.steps_short;
      summary_.pages_mapped = c.pages_mapped;
      summary_.retained_slot_reuses = c.retained_slot_reuses;
      summary_.faults_absorbed += c.steps_undone;
    }
    session_.set_call_observer({});
    summary_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    summary_.call_us = percentiles(call_us_);
    return summary_;
  }

 private:
  // Trace ids are unique per process and iteration, so flows from several
  // workers never collide in a merged trace.
  TraceContext next_trace() {
    return TraceContext{(uint64_t(::getpid()) << 40) ^ (o_.seed << 32) ^ iteration_, ++span_, 0};
  }

  // Every round trip's receipt latency [us], as the session times it.
  void record_call(Owner, double micros) {
    call_us_.push_back(micros);
    ++summary_.round_trips;
  }

  void note_error(const Error& e) {
    ++summary_.operation_errors;
    if (summary_.first_error.empty()) summary_.first_error = e.describe();
    // Nothing more can be done through this session: what it held is gone
    // with the node (or was reclaimed by it), so the run stops here.
    if (e.code == ErrorCode::node_lost || e.code == ErrorCode::session_ended) summary_.stopped_by = e;
  }

  // An allocation or append that changed nothing: a fault point rolled it
  // back (fault-injection runs), the pool had no room, or the namespace was
  // at its block quota. The request is dropped or stops decoding.
  void count_refusal(AllocationOutcome outcome) {
    if (outcome == AllocationOutcome::rolled_back)
      ++summary_.faults_absorbed;
    else if (outcome == AllocationOutcome::quota_exceeded)
      ++summary_.quota_exceeded;
    else
      ++summary_.out_of_capacity;
  }

  // An owner's fault point fired inside the op (a fault-injection run): the
  // owner undid it, the request is served without what the op would have
  // given (reuse, or a publication), so this is a fault absorbed, not an error.
  void note_op_error(const Error& e) {
    if (e.code == ErrorCode::fault_injected) {
      ++summary_.faults_absorbed;
    } else if (e.code == ErrorCode::authorization_stale_generation ||
               e.code == ErrorCode::authorization_namespace_closed) {
      // The namespace moved to a successor generation or a purge stopped
      // it: authorized again before the next admission.
      ++summary_.stale_generation_refusals;
      grant_stale_ = true;
    } else if (e.code == ErrorCode::reuse_receipt_revoked) {
      ++summary_.receipts_revoked;  // the request had its blocks already
    } else {
      note_error(e);
    }
  }

  // After a refusal for a stale or closed generation: the grant of the
  // namespace's current generation (a closed namespace is tried again next
  // iteration; its requests go on without reuse meanwhile).
  void reauthorize_if_stale() {
    if (!grant_stale_) return;
    Result<NamespaceGrantReceipt> grant = session_.authorize(namespace_, next_trace());
    if (grant.ok()) {
      grant_stale_ = false;
      ++summary_.reauthorizations;
    } else if (grant.error().code != ErrorCode::authorization_namespace_closed) {
      note_error(grant.error());
    }
  }

  // What the ends of reuse attempts answered (0x0CD steps 9-10): a refused
  // successor, an op refused or a lease an owner no longer held.
  void take_end_notes() {
    ReuseEndNotes notes = session_.take_reuse_end_notes();
    summary_.successors_published += notes.successors_published;
    for (const Error& e : notes.errors) {
      // Leases an owner no longer held: a bookkeeping error, never absorbed.
      if (e.field == "leases")
        note_error(e);
      else
        note_op_error(e);
    }
  }

  void release_receipts() {
    if (Status sent = session_.flush_reuse_ends(next_trace()); !sent.ok()) return note_error(sent.error());
    take_end_notes();
  }

  void apply_entries(LiveRequest& r, const std::vector<TableEntryUpdate>& entries) {
    for (const TableEntryUpdate& e : entries) {
      const uint32_t g = group_index(e.handle.group);
      if (r.table[g].size() <= e.logical_block) r.table[g].resize(e.logical_block + 1);
      r.table[g][e.logical_block] = e.handle;
    }
  }
  uint32_t group_index(CacheGroupId group) const {
    for (uint32_t g = 0; g < groups_; ++g)
      if (store_.group(g) == group) return g;
    return 0;
  }

  // Writes (or, when `verify`, compares) the rows [first, end) of a request.
  void touch_rows(LiveRequest& r, uint32_t first, uint32_t end, bool verify) {
    const std::vector<uint64_t> h = prefix_hashes(r.tokens);
    for (uint32_t g = 0; g < groups_; ++g) {
      std::vector<uint8_t> row(store_.row_bytes(g)), seen(store_.row_bytes(g));
      for (uint32_t t = first; t < end; ++t) {
        const uint32_t j = t / P_;
        if (j >= r.table[g].size()) {
          note_error(make_error(ErrorCode::table_out_of_bounds, "receipt table misses block " + std::to_string(j)));
          return;
        }
        const uint32_t slot = r.table[g][j].block.value;  // the node's pools use block id == slot
        if (Status in = store_.check_rows(g, slot, t % P_, 1); !in.ok()) {
          note_error(in.error());
          return;
        }
        fill_row(h[t], g, row);
        if (verify) {
          store_.read_rows(g, slot, t % P_, 1, seen);
          ++summary_.reused_rows_checked;
          if (seen != row) ++summary_.reuse_mismatches;
        } else {
          store_.write_rows(g, slot, t % P_, 1, row);
          ++summary_.rows_written;
        }
      }
    }
  }

  void admit(std::vector<LiveRequest>& live) {
    std::vector<LiveRequest> fresh;
    while (live.size() + fresh.size() < o_.in_flight) {
      LiveRequest r;
      r.tokens = system_prompts_[rng_() % system_prompts_.size()];
      const uint32_t suffix = 1 + static_cast<uint32_t>(rng_() % o_.max_suffix_tokens);
      for (uint32_t i = 0; i < suffix; ++i) r.tokens.push_back(static_cast<TokenId>(rng_() % 32000));
      r.prompt_tokens = static_cast<uint32_t>(r.tokens.size());
      r.table.resize(groups_);
      fresh.push_back(std::move(r));
      ++started_;
      if (o_.max_requests != 0 && started_ >= o_.max_requests) break;
    }
    if (slots_ != nullptr) bind_slots(fresh);
    if (fresh.empty()) return;
    // One reuse message for every new request of the iteration: the node's
    // executable-reuse transaction (0x0CD) answers a receipt whose blocks
    // are leased to this session, or why the attempt ended; it also ends the
    // previous iteration's receipts. Then one allocation takes the hits.
    std::vector<AdmissionRequest> asks;
    // A request served from a slot reads its hit there: the node's step 7
    // waits for that slot's mapped frontier to cover it (0x0CD).
    for (const LiveRequest& r : fresh)
      asks.push_back(AdmissionRequest{namespace_,
                                      r.tokens,
                                      {},
                                      LogitsPath::logits_required,
                                      r.slot ? std::optional<RequestId>(r.slot->request) : std::nullopt});
    const TraceContext reuse_trace = next_trace();
    Result<std::vector<Admission>> answered = session_.admit(asks, /*reuse=*/true, reuse_trace, next_trace());
    take_end_notes();
    if (!answered.ok()) {
      note_error(answered.error());
      for (LiveRequest& r : fresh) free_slot(r);
      return;
    }
    AllocatorBatch commit{next_trace(), {}};
    std::vector<LiveRequest> admitted;
    for (size_t i = 0; i < fresh.size(); ++i) {
      LiveRequest& r = fresh[i];
      const Admission& a = (*answered)[i];
      if (a.reuse_error) {
        note_op_error(*a.reuse_error);  // a fault absorbed: served without reuse, its rows recomputed
      } else if (a.rejection && is_stale_namespace(a.rejection->reason)) {
        ++summary_.stale_generation_refusals;
        grant_stale_ = true;
      }
      if (a.allocation_error) {
        // The receipt's leases keep its blocks current, so this is an error,
        // unless a purge revoked the receipt first (its release then answers
        // reuse_receipt_revoked): the request is dropped like one refused for
        // capacity.
        if (a.hit_withdrawn())
          ++summary_.hits_withdrawn;
        else
          note_error(*a.allocation_error);
        free_slot(r);
        continue;
      }
      const AllocationReceipt* receipt = &*a.allocation;
      if (receipt->outcome != AllocationOutcome::committed) {
        count_refusal(receipt->outcome);
        free_slot(r);
        continue;
      }
      // The attempt ends once the prefill below read its rows (end_attempt).
      r.hit_tokens = a.hit_tokens();
      r.reuse_snapshot = a.reuse_attempt();
      r.fence = RequestFence{receipt->request_id, receipt->request_generation, receipt->table_version_after};
      apply_entries(r, receipt->published_entries);
      touch_rows(r, 0, r.hit_tokens, /*verify=*/true);
      if (r.slot)
        prefill_slot(r);
      else
        touch_rows(r, r.hit_tokens, r.prompt_tokens, /*verify=*/false);
      commit.ops.push_back(CommitRowsOp{r.fence, r.prompt_tokens});
      summary_.prompt_tokens += r.prompt_tokens;
      summary_.hit_tokens += r.hit_tokens;
      admitted.push_back(std::move(r));
    }
    if (admitted.empty()) return;
    Result<AllocatorBatchReceipt> committed = session_.allocator(commit);
    if (!committed.ok()) {
      note_error(committed.error());
      // The prefills read the reused rows: their attempts still end.
      for (LiveRequest& r : admitted) {
        if (r.reuse_snapshot) end_attempt(r, false);
        free_slot(r);
      }
      return;
    }
    for (size_t i = 0; i < admitted.size(); ++i) {
      LiveRequest& r = admitted[i];
      const auto* c = std::get_if<AllocationReceipt>(&committed->outcomes[i]);
      if (c != nullptr)
        r.fence.table_version = c->table_version_after;
      else
        note_error(std::get<Error>(committed->outcomes[i]));
      if (r.reuse_snapshot) end_attempt(r, c != nullptr);
      live.push_back(std::move(r));
    }
  }

  // Ends a request's reuse attempt, executed: its prefill read the reused
  // rows. With its prompt rows committed, its full prompt blocks past the
  // hit become the attempt's one COW successor (0x0CD step 10), published in
  // the next reuse message before that message's lookups; the request then
  // publishes nothing itself when it finishes.
  void end_attempt(LiveRequest& r, bool rows_committed) {
    std::optional<ReuseSuccessor> successor;
    const uint32_t first = r.hit_tokens / P_, full = r.prompt_tokens / P_;
    if (rows_committed && full > first) {
      successor =
          ReuseSuccessor{r.fence.request, std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + full * P_), full};
      r.successor = true;
    }
    session_.end_reuse(*r.reuse_snapshot, true, std::move(successor));
    r.reuse_snapshot.reset();
  }

  // One decode token for every live request: a batch of appends, the rows
  // written at the receipts' blocks, a batch of commits.
  void decode_step(std::vector<LiveRequest>& live) {
    if (slots_ != nullptr) return decode_step_in_slots(live);
    AllocatorBatch append{next_trace(), {}};
    std::vector<LiveRequest*> stepping;
    for (LiveRequest& r : live) {
      if (r.decoded >= o_.decode_tokens) continue;
      const std::vector<uint64_t> h = prefix_hashes(r.tokens);
      r.tokens.push_back(static_cast<TokenId>(h.back() % 32000));  // the "greedy" next token
      append.ops.push_back(AppendOp{r.fence, {}, std::nullopt});
      stepping.push_back(&r);
    }
    if (stepping.empty()) return;
    Result<AllocatorBatchReceipt> appended = session_.allocator(append);
    if (!appended.ok()) {
      note_error(appended.error());
      return;
    }
    AllocatorBatch commit{next_trace(), {}};
    std::vector<LiveRequest*> committing;
    for (size_t i = 0; i < stepping.size(); ++i) {
      LiveRequest& r = *stepping[i];
      const auto* receipt = std::get_if<AllocationReceipt>(&appended->outcomes[i]);
      if (receipt == nullptr || receipt->outcome != AllocationOutcome::committed) {
        if (receipt == nullptr)
          note_error(std::get<Error>(appended->outcomes[i]));
        else
          count_refusal(receipt->outcome);
        r.tokens.pop_back();
        r.decoded = o_.decode_tokens;  // stop decoding this one; it is released normally
        continue;
      }
      r.fence.generation = receipt->request_generation;
      r.fence.table_version = receipt->table_version_after;
      apply_entries(r, receipt->published_entries);
      const uint32_t pos = receipt->context_tokens_after - 1;
      touch_rows(r, pos, pos + 1, false);
      commit.ops.push_back(CommitRowsOp{r.fence, pos + 1});
      committing.push_back(&r);
      ++r.decoded;
    }
    if (committing.empty()) return;
    Result<AllocatorBatchReceipt> committed = session_.allocator(commit);
    if (!committed.ok()) {
      note_error(committed.error());
      return;
    }
    for (size_t i = 0; i < committing.size(); ++i) {
      if (const auto* c = std::get_if<AllocationReceipt>(&committed->outcomes[i]))
        committing[i]->fence.table_version = c->table_version_after;
      else
        note_error(std::get<Error>(committed->outcomes[i]));
    }
  }

  // Publishes the full prompt blocks of finished requests, then releases them.
  void finish(std::vector<LiveRequest>& live) {
    const bool tails = node_publishes_partial_tails(session_.session());
    PrefixBatch publish{next_trace(), {}};
    AllocatorBatch release{next_trace(), {}};
    std::vector<LiveRequest> remaining;
    bool successor_waits = false;
    for (LiveRequest& r : live) {
      if (r.decoded < o_.decode_tokens) {
        remaining.push_back(std::move(r));
        continue;
      }
      successor_waits = successor_waits || session_.successor_pending(r.fence.request);
      // The prompt's full blocks past the hit (unless a reuse successor
      // published them) and, under the partial-tail policy, its last partly
      // filled block's prompt rows.
      const uint32_t full = r.prompt_tokens / P_;
      const uint32_t first = r.successor ? full : r.hit_tokens / P_;
      const uint32_t tail = tails ? r.prompt_tokens % P_ : 0;
      if (full > first || tail > 0)
        publish.ops.push_back(
            PrefixPublishOp{namespace_,
                            r.fence.request,
                            std::vector<TokenId>(r.tokens.begin(), r.tokens.begin() + r.prompt_tokens),
                            first,
                            full,
                            {},
                            NamespaceGeneration{0},
                            tail});
      // Built in place: GCC 12 misreads a moved variant temporary here.
      release.ops.emplace_back(std::in_place_type<ReleaseOp>, r.fence, ReleaseReason::finished);
      if (r.slot) {
        check_slot_rows(r);
        free_slot(r);
      }
    }
    // A successor is published from the request's blocks: send it while
    // the request still holds them.
    if (successor_waits) release_receipts();
    if (!publish.ops.empty()) {
      Result<PrefixBatchReceipt> published = session_.prefix(publish);
      if (!published.ok())
        note_error(published.error());
      else
        for (const PrefixOutcome& o : published->outcomes)
          if (const auto* e = std::get_if<Error>(&o)) note_op_error(*e);
    }
    if (!release.ops.empty()) {
      Result<AllocatorBatchReceipt> released = session_.allocator(release);
      if (!released.ok()) {
        note_error(released.error());
      } else {
        for (const AllocatorOutcome& o : released->outcomes) {
          if (const auto* e = std::get_if<Error>(&o))
            note_error(*e);
          else
            ++summary_.requests;
        }
      }
    }
    live = std::move(remaining);
  }

  // --- virtual reservations (0x06) ---------------------------------------

  // A slot for each new request, stepped over its prompt before any row of
  // it is written (map before use, 0x06D). A request that gets no slot, or
  // no pages now, is not started (counted; other workers hold them).
  void bind_slots(std::vector<LiveRequest>& fresh) {
    std::vector<uint32_t> reserve, rows;
    for (const LiveRequest& r : fresh) {
      reserve.push_back(r.prompt_tokens + o_.decode_tokens);
      rows.push_back(r.prompt_tokens);
    }
    Result<std::vector<std::optional<WorkerSlots::Slot>>> bound = slots_->bind(reserve, rows, next_trace());
    if (!bound.ok()) {
      note_error(bound.error());
      fresh.clear();
      return;
    }
    std::vector<LiveRequest> kept;
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (!(*bound)[i]) {
        ++summary_.slots_unavailable;
        continue;
      }
      fresh[i].slot = (*bound)[i];
      kept.push_back(std::move(fresh[i]));
    }
    fresh = std::move(kept);
  }

  void free_slot(LiveRequest& r) {
    if (!r.slot) return;
    slots_->free(*r.slot);
    r.slot.reset();
  }

  // The prompt's rows in the request's slot: the hit's read in the pools
  // (where touch_rows verified them) and copied in, the rest computed there
  // and copied into the request's blocks, which the prefix index publishes.
  void prefill_slot(LiveRequest& r) {
    const std::vector<uint64_t> h = prefix_hashes(r.tokens);
    std::vector<uint8_t> row(store_.row_bytes(0));
    for (uint32_t t = 0; t < r.prompt_tokens; ++t) {
      const uint32_t j = t / P_;
      if (j >= r.table[0].size()) {
        note_error(make_error(ErrorCode::table_out_of_bounds, "receipt table misses block " + std::to_string(j)));
        return;
      }
      const uint32_t block = r.table[0][j].block.value;
      if (Status in = store_.check_rows(0, block, t % P_, 1); !in.ok()) return note_error(in.error());
      if (t < r.hit_tokens)
        store_.read_rows(0, block, t % P_, 1, row);
      else
        fill_row(h[t], 0, row);
      if (Status w = slots_->write_row(*r.slot, t, row); !w.ok()) return note_error(w.error());
      if (t < r.hit_tokens) continue;
      if (Status rd = slots_->read_row(*r.slot, t, row); !rd.ok()) return note_error(rd.error());
      store_.write_rows(0, block, t % P_, 1, row);
      ++summary_.rows_written;
    }
    slots_->append(*r.slot, r.prompt_tokens);
  }

  // One decode token for every live request, its row written in its slot
  // once the mapper owner stepped the slot over it. A slot whose step came
  // up short of page handles stops decoding (as a refused append does).
  void decode_step_in_slots(std::vector<LiveRequest>& live) {
    std::vector<LiveRequest*> stepping;
    std::vector<WorkerSlots::Slot> slots;
    std::vector<uint32_t> rows;
    for (LiveRequest& r : live) {
      if (r.decoded >= o_.decode_tokens || !r.slot) continue;
      const std::vector<uint64_t> h = prefix_hashes(r.tokens);
      r.tokens.push_back(static_cast<TokenId>(h.back() % 32000));  // the "greedy" next token
      stepping.push_back(&r);
      slots.push_back(*r.slot);
      rows.push_back(static_cast<uint32_t>(r.tokens.size()));
    }
    if (stepping.empty()) return;
    Result<std::vector<WorkerSlots::Stepped>> ready = slots_->step(slots, rows, next_trace());
    if (!ready.ok()) {
      note_error(ready.error());
      for (LiveRequest* r : stepping) {
        r->tokens.pop_back();
        r->decoded = o_.decode_tokens;
      }
      return;
    }
    std::vector<uint8_t> row(store_.row_bytes(0));
    for (size_t i = 0; i < stepping.size(); ++i) {
      LiveRequest& r = *stepping[i];
      if ((*ready)[i] != WorkerSlots::Stepped::mapped) {
        // Short of page handles: refused for capacity, as a refused append
        // is; an undone step is a fault absorbed (WorkerSlots counts it).
        if ((*ready)[i] == WorkerSlots::Stepped::short_of_handles) ++summary_.out_of_capacity;
        r.tokens.pop_back();
        r.decoded = o_.decode_tokens;
        continue;
      }
      const auto pos = static_cast<uint32_t>(r.tokens.size() - 1);
      fill_row(prefix_hashes(r.tokens)[pos], 0, row);
      if (Status w = slots_->write_row(*r.slot, pos, row); !w.ok()) {
        note_error(w.error());
        r.decoded = o_.decode_tokens;
        continue;
      }
      ++summary_.rows_written;
      slots_->append(*r.slot, pos + 1);
      ++r.decoded;
    }
  }

  // Every row of a finished request, read back from its slot through this
  // worker's view: a page mapped wrongly, or written by another slot's owner,
  // shows here as a mismatch.
  void check_slot_rows(const LiveRequest& r) {
    const std::vector<uint64_t> h = prefix_hashes(r.tokens);
    std::vector<uint8_t> want(store_.row_bytes(0)), seen(store_.row_bytes(0));
    for (uint32_t t = 0; t < r.tokens.size(); ++t) {
      if (Status rd = slots_->read_row(*r.slot, t, seen); !rd.ok()) return note_error(rd.error());
      fill_row(h[t], 0, want);
      ++summary_.slot_rows_checked;
      if (seen != want) ++summary_.slot_row_mismatches;
    }
  }

  EngineSession& session_;
  shm::SharedPoolStore& store_;
  WorkerSlots* slots_;
  const WorkerOptions& o_;
  std::string namespace_;
  std::mt19937_64 rng_;
  uint32_t groups_, P_;
  std::vector<std::vector<TokenId>> system_prompts_;
  WorkerSummary summary_;
  uint64_t started_ = 0, iteration_ = 0, span_ = 0;
  bool grant_stale_ = false;     // a refusal said the grant's generation is no longer current
  std::vector<double> call_us_;  // every round trip's receipt latency [us]
};

// The node's mapper slots when its layout declares virtual pages (null
// otherwise), checked against this workload: every request must fit one
// slot's T_max, and the block pools' one group must hold the slot's rows.
Result<std::unique_ptr<WorkerSlots>> attach_slots(const NodeDescriptor& node, const WorkerOptions& o,
                                                  EngineSession& session, const shm::SharedPoolStore& store) {
  Result<CacheLayoutManifest> layout = load_layout_manifest(node.layout_path);
  if (!layout.ok()) return layout.error();
  if (layout->digest() != node.layout_sha256)
    return make_error(ErrorCode::incompatible, "layout file " + node.layout_path + " changed since the node started",
                      "layout_sha256");
  if (layout->physical_mode != PhysicalMode::virtual_pages) return std::unique_ptr<WorkerSlots>();
  Result<std::unique_ptr<WorkerSlots>> slots = WorkerSlots::attach(node, *layout, session);
  if (!slots.ok()) return slots.error();
  const uint64_t longest = uint64_t{o.system_prompt_tokens} + o.max_suffix_tokens + o.decode_tokens;
  if (longest > node.mapper->max_tokens)
    return make_error(ErrorCode::invalid_argument,
                      "a request of up to " + std::to_string(longest) +
                          " tokens (system prompt, suffix and decode) does not fit the node's request slots of " +
                          std::to_string(node.mapper->max_tokens) + " tokens",
                      "decode_tokens");
  if (store.group_count() != 1 || store.row_bytes(0) != (*slots)->row_bytes())
    return make_error(ErrorCode::incompatible, "the node's block pools do not hold the rows of its request slots",
                      "layout");
  return slots;
}

}  // namespace

Result<WorkerSummary> run_worker(const NodeDescriptor& node, const WorkerOptions& options) {
  if (options.in_flight == 0 || options.system_prompts == 0 || options.max_suffix_tokens == 0)
    return make_error(ErrorCode::invalid_argument, "in_flight, system_prompts and max_suffix_tokens must be > 0",
                      "workload");
  ClientOptions client_options;
  client_options.worker_name = options.worker_name;
  client_options.trace = options.trace;
  client_options.timeout = std::chrono::milliseconds(options.call_timeout_ms);
  client_options.channel_socket = options.channel_socket;
  client_options.channel_only = options.channel_only;
  Result<std::unique_ptr<EngineSession>> engine = EngineSession::connect(node, options.token_hex, client_options);
  if (!engine.ok()) return engine.error();
  const SessionReceipt& session = (*engine)->session();
  if (options.on_session) options.on_session(session);
  std::string ns = options.namespace_name;
  if (ns.empty()) {
    if (session.allowed_namespaces.empty())
      return make_error(ErrorCode::authorization_namespace_denied,
                        "principal " + session.principal + " may use no namespace", "namespace");
    ns = session.allowed_namespaces.front();
  }
  Result<NamespaceGrantReceipt> grant = (*engine)->authorize(ns, {});
  if (!grant.ok()) return grant.error();

  // Attach every pool the session receipt names (shared memory or GPU),
  // checked against the generation and layout it names.
  Result<std::unique_ptr<shm::SharedPoolStore>> store = attach_session_pools((*engine)->client());
  if (!store.ok()) return store.error();
  // A layout of physical_mode = "virtual_pages" serves every request from a
  // request slot of the node's mapper owner (0x06), as `kvrt run` does.
  std::unique_ptr<WorkerSlots> slots;
  KVRT_TRY_ASSIGN(slots, attach_slots(node, options, **engine, **store));
  Worker worker(**engine, **store, slots.get(), options, ns);
  return worker.run();
}

}  // namespace kvrt
