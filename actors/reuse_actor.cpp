// The executable-reuse coordinator (spec 0x0CD): one actor per node.
// A worker's ReuseBatch arrives through its session actor; this actor runs
// the batch's ops through steps 1-8 as one message per owner per step
// (services/reuse/reuse_batch_run.hpp has the sequence), releases the leases
// of every attempt that ended without a receipt, counts each attempt in the
// node's transaction funnel (0x0CF) and answers one receipt. It uses `then`,
// not `await`: other batches proceed while one waits for an owner, which is
// why every step re-checks what an earlier one read (leases, versions).
#include <spdlog/spdlog.h>

#include <array>
#include <map>
#include <set>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "actors/run_driver.hpp"
#include "services/common/overloaded.hpp"
#include "services/reuse/reuse_batch_run.hpp"

namespace kvrt::actors {

namespace {

struct ReuseActorState {
  static inline const char* name = "reuse";
  OwnerHandles owners;
  ReuseNodeFacts facts;
  Observability obs;
  ReuseFunnel funnel;  // every attempt that ended in a receipt or a rejection
  // Attempts refused at steps 1-2, by reason: they never reached an index,
  // so the index owners' lookup counters do not see them (0x0CE).
  std::array<uint64_t, kRejectionReasonCount> refused_before_lookup{};
  std::map<uint64_t, uint32_t> in_flight;  // session -> batches being sequenced
  std::set<uint64_t> ended;                // sessions that ended with a batch in flight
  OpenReuseAttempts open;                  // receipts handed out, awaiting their release op
  uint64_t batches = 0, ops = 0, receipts = 0, rejections = 0, errors = 0, leases_released = 0;
  uint64_t successors_published = 0, successors_refused = 0;  // step 10's second ending
  uint64_t receipts_revoked = 0;                              // by purges (0x0CE step 4)
};

using ReuseSelf = reuse_actor::stateful_pointer<ReuseActorState>;

struct ReuseRun {
  SessionId session;
  ReuseBatchRun core;
  caf::typed_response_promise<wire_bytes> promise;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // What run_driver.hpp drives: the coordinator's own stage order.
  using Request = ReuseBatchRun::Request;
  std::optional<Request> next() { return core.next(); }
};
using RunPtr = std::shared_ptr<ReuseRun>;

// Hands leases back to their owners. Requested before the receipt is
// delivered, so each owner handles it before anything the worker sends after
// reading the receipt (in-process enqueue is immediate and ordered).
void return_leases(ReuseSelf self, SessionId session, TraceContext trace, const ReuseBatchRun::LeaseReturn& leases) {
  auto& st = self->state;
  auto ignore = [](std::vector<uint8_t>&) {};
  auto log_failure = [self, session, trace](caf::error& e) {
    logger_or_default(self->state.obs.log)
        .warn("actor=reuse session={} trace={:016x} could not return leases: {}", session.value, trace.trace_id,
              caf::to_string(e));
  };
  if (!leases.blocks.empty())
    self->request(st.owners.allocator, caf::infinite, unlease_atom::value, session.value, trace, leases.blocks)
        .then(ignore, log_failure);
  if (!leases.paths.empty())
    self->request(st.owners.prefix, caf::infinite, unlease_atom::value, session.value, trace, leases.paths)
        .then(ignore, log_failure);
  st.leases_released += leases.blocks.size() + leases.paths.size();
}

void finish(ReuseSelf self, const RunPtr& run) {
  auto& st = self->state;
  const uint64_t s = run->session.value;
  // Every answer this run had came after the end, if the end came at all
  // (the gateway tells this actor first): leases some owner granted after
  // its own end_session would never be reclaimed, so all of them go back.
  const bool ended = st.ended.contains(s);
  const ReuseBatchRun::LeaseReturn release = ended ? run->core.all_leases() : run->core.leases_to_release();
  if (!release.empty()) return_leases(self, run->session, run->core.trace(), release);
  // The receipts' attempts wait for their release op (steps 9-10); a
  // session that ended will send none, and its leases went back above.
  for (ReuseAttempt& a : run->core.take_receipt_attempts()) {
    if (ended) continue;
    if (Status held = st.open.hold(run->session, std::move(a)); !held.ok())
      logger_or_default(st.obs.log)
          .error("actor=reuse session={} trace={:016x} could not hold an attempt open: {}", s,
                 run->core.trace().trace_id, held.error().describe());
  }
  if (--st.in_flight[s] == 0) {
    st.in_flight.erase(s);
    st.ended.erase(s);
  }
  ReuseBatchReceipt receipt = run->core.receipt();
  for (const ReuseOutcome& o : receipt.outcomes) {
    if (std::holds_alternative<ExecutableReuseReceipt>(o))
      ++st.receipts;
    else if (const auto* r = std::get_if<ReuseRejectionReceipt>(&o)) {
      ++st.rejections;
      if (r->step <= ReuseStep::build_key) ++st.refused_before_lookup[static_cast<size_t>(r->reason)];
    } else if (std::holds_alternative<Error>(o))
      ++st.errors;
    else if (const auto* rel = std::get_if<ReuseReleaseReceipt>(&o)) {
      if (rel->published_successor) ++st.successors_published;
      if (rel->successor_refused) ++st.successors_refused;
    }
  }
  for (const FunnelOutcome& f : run->core.funnel_outcomes()) st.funnel.record(f);
  log_answered(st.obs.log, "reuse", s, run->core.trace(), receipt);
  run->promise.deliver(to_wire(codec::encode(receipt)));
  record_latency(st.obs, ReuseRoute::id, run->started);
}

// Sends one stage's request to the owner its type names; every answer is
// awaited interleaved (other batches proceed meanwhile, which is why every
// step re-checks what an earlier one read: leases, versions).
template <class Resume>
void send_stage(ReuseSelf self, const RunPtr& run, const ReuseBatchRun::Request& request, Resume resume) {
  auto& st = self->state;
  const uint64_t session = run->session.value;
  const TraceContext trace = run->core.trace();
  // CAF reads a handler's argument types, so each stage's is spelled out.
  auto answered = [run, resume]<class T>(std::type_identity<T>) {
    return [run, resume](T& answer) {
      run->core.answer(std::move(answer));
      resume();
    };
  };
  auto failed = [run, resume](const char* owner) {
    return [run, resume, owner](caf::error& e) {
      run->core.failed(transport_error(owner, e));
      resume();
    };
  };
  std::visit(
      overloaded{
          [&](const SuccessorPublish& s) {
            // The same message a worker's publication is, so the same
            // ownership, grant and committed-rows checks. An undecodable
            // answer refuses every successor of the batch.
            on_answer<Waiting::interleaved>(
                self->request(st.owners.prefix, caf::infinite, route_atom::value, PrefixRoute::id.value, session,
                              to_wire(codec::encode(s.batch))),
                [run, resume](wire_bytes& reply) {
                  Result<PrefixBatchReceipt> published = codec::decode<PrefixBatchReceipt>(as_span(reply));
                  if (!published.ok()) {
                    // The owner refused the whole batch (it answers an ErrorMessage then).
                    Result<ErrorMessage> refused = codec::decode<ErrorMessage>(as_span(reply));
                    if (refused.ok()) published = refused->error;
                  }
                  run->core.answer(published);
                  resume();
                },
                failed("prefix_index"));
          },
          [&](const BlockLeaseReturn& r) {
            st.leases_released += r.leases.size();
            on_answer<Waiting::interleaved>(
                self->request(st.owners.allocator, caf::infinite, unlease_atom::value, session, trace, r.leases),
                answered(std::type_identity<std::vector<uint8_t>>{}), failed("allocator"));
          },
          [&](const PathLeaseReturn& r) {
            st.leases_released += r.leases.size();
            on_answer<Waiting::interleaved>(
                self->request(st.owners.prefix, caf::infinite, unlease_atom::value, session, trace, r.leases),
                answered(std::type_identity<std::vector<uint8_t>>{}), failed("prefix_index"));
          },
          [&](const KeyLookup& r) {
            on_answer<Waiting::interleaved>(
                self->request(st.owners.authorization, caf::infinite, reuse_atom::value, session, trace, r.requests),
                answered(std::type_identity<std::vector<ReuseKeyAnswer>>{}), failed("authorization"));
          },
          [&](const CandidateLookup& r) {
            on_answer<Waiting::interleaved>(
                self->request(st.owners.prefix, caf::infinite, reuse_atom::value, session, trace, r.lookups),
                answered(std::type_identity<std::vector<CandidateReply>>{}), failed("prefix_index"));
          },
          [&](const BlockLeaseAcquire& r) {
            on_answer<Waiting::interleaved>(
                self->request(st.owners.allocator, caf::infinite, reuse_atom::value, session, trace, r.requests),
                answered(std::type_identity<std::vector<ReuseLeaseAnswer>>{}), failed("allocator"));
          },
          [&](const PathLeaseAcquire& r) {
            on_answer<Waiting::interleaved>(
                self->request(st.owners.prefix, caf::infinite, reuse_atom::value, session, trace, r.requests),
                answered(std::type_identity<std::vector<ReusePathLeaseAnswer>>{}), failed("prefix_index"));
          },
          [&](const IndexVersionRead&) {
            // Read after the allocator answered, so after the leases were taken.
            on_answer<Waiting::interleaved>(self->request(st.owners.prefix, caf::infinite, version_atom::value, trace),
                                            answered(std::type_identity<ReuseIndexVersion>{}), failed("prefix_index"));
          },
          [&](const SlotFrontierRead& r) {
            // After the versions, so after the leases: the frontier read is
            // the last gate before the snapshot (0x0CD step 7).
            if (!st.owners.mapper) {
              run->core.answer(std::vector<SlotFrontierReply>(
                  r.requests.size(), make_error(ErrorCode::invalid_argument,
                                                "the node serves no mapper owner: reused rows cannot land in a "
                                                "request slot",
                                                "await_slot_mapping")));
              resume();
              return;
            }
            on_answer<Waiting::interleaved>(
                self->request(st.owners.mapper, caf::infinite, reuse_atom::value, session, trace, r.requests),
                answered(std::type_identity<std::vector<SlotFrontierReply>>{}), failed("mapper"));
          },
          [&](const SnapshotFreeze& r) {
            on_answer<Waiting::interleaved>(
                self->request(st.owners.executor, caf::infinite, reuse_atom::value, trace, r.requests),
                answered(std::type_identity<std::vector<SnapshotAnswer>>{}), failed("executor"));
          },
      },
      request);
}

OwnerStats reuse_stats(const ReuseActorState& st, bool validate) {
  OwnerStats out;
  out.owner = "reuse";
  if (validate || kValidateOnEveryStats) {
    Status v = st.open.validate();
    if (v.ok() && st.facts.tier) v = st.facts.tier->validate();
    if (v.ok() && st.facts.prompts) v = st.facts.prompts->validate();
    record_validation(out, v);
  }
  auto put = [&](std::string name, uint64_t v) {
    out.values.push_back(StatValue{std::move(name), static_cast<int64_t>(v)});
  };
  put("batches", st.batches);
  put("attempts", st.ops);
  put("receipts", st.receipts);
  put("rejections", st.rejections);
  put("errors", st.errors);
  put("leases_released", st.leases_released);
  put("open_attempts", st.open.size());
  put("successors_published", st.successors_published);
  put("successors_refused", st.successors_refused);
  put("receipts_revoked", st.receipts_revoked);
  // As "reuse_refused_<reason>" in the node's stats: node_reuse_funnel()
  // counts them as requests refused for authorization.
  for (size_t r = 0; r < kRejectionReasonCount; ++r)
    if (bucket_of(static_cast<RejectionReason>(r)) == ReuseBucket::authorization)
      put("refused_" + std::string(to_string(static_cast<RejectionReason>(r))), st.refused_before_lookup[r]);
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    put(std::string("rejected_") + std::string(to_string(static_cast<ReuseBucket>(b))),
        st.funnel.rejections(static_cast<ReuseBucket>(b)));
  put("tier", st.facts.tier ? 1 : 0);
  if (st.facts.tier) st.facts.tier->put_stats(out);
  if (st.facts.prompts) st.facts.prompts->put_stats(out);
  return out;
}

}  // namespace

// A session_save or session_resume: the authorization owner authorizes the
// session for the namespace and builds the generation's key (steps 1-2 of
// 0x0CD, as for a reuse attempt), then the tier answers under the identity
// the node derives from them.
template <class R>
caf::result<wire_bytes> serve_tier(ReuseSelf self, uint64_t session, typename R::Request request) {
  auto& st = self->state;
  if (!st.facts.tier)
    return error_reply(make_error(ErrorCode::invalid_argument,
                                  "this node has no session tier: add a [tier] section to its config", "tier"));
  const auto started = std::chrono::steady_clock::now();
  auto promise = self->make_response_promise<wire_bytes>();
  const TraceContext trace = request.trace;
  const std::vector<ReuseKeyRequest> keys{SessionTierService::key_request(request)};
  self->request(st.owners.authorization, caf::infinite, reuse_atom::value, session, trace, keys)
      .then(
          [self, session, started, promise,
           request = std::move(request)](std::vector<ReuseKeyAnswer>& answers) mutable {
            auto& st = self->state;
            if (answers.size() != 1) {
              promise.deliver(error_reply(
                  make_error(ErrorCode::invariant_violated, "the authorization owner answered another count", "tier")));
              return;
            }
            auto receipt = [&] {
              if constexpr (std::is_same_v<R, SessionSaveRoute>)
                return st.facts.tier->save(answers[0], request);
              else
                return st.facts.tier->resume(answers[0], request);
            }();
            if (st.obs.latency) st.obs.latency->record(R::id.value, std::chrono::steady_clock::now() - started);
            if (!receipt.ok()) {
              log_refused(st.obs.log, "reuse", session, request.trace, receipt.error());
              promise.deliver(error_reply(receipt.error()));
              return;
            }
            promise.deliver(to_wire(codec::encode(*receipt)));
          },
          [promise](caf::error& e) mutable {
            promise.deliver(error_reply(make_error(ErrorCode::rpc_failed, caf::to_string(e), "authorization")));
          });
  return promise;
}

// ---- Prompt Cache (0x0CB): the prompt_* routes ------------------------------
// Each authorizes first (steps 1-2 of 0x0CD, before any lookup, 0x0CE),
// then PromptModuleService decides at every step; the allocator owner
// grants the leases. Node leases the service lets go go back at once.

void return_node_leases(ReuseSelf self, const std::vector<LeaseId>& leases) {
  if (!leases.empty()) self->send(self->state.owners.allocator, unlease_atom::value, leases);
}

template <class Request, class Then>
void authorize_prompt(ReuseSelf self, uint64_t session, const Request& request,
                      caf::typed_response_promise<wire_bytes> promise, Then then) {
  const std::vector<ReuseKeyRequest> keys{PromptModuleService::key_request(request)};
  self->request(self->state.owners.authorization, caf::infinite, reuse_atom::value, session, request.trace, keys)
      .then(
          [promise, then = std::move(then)](std::vector<ReuseKeyAnswer>& answers) mutable {
            if (answers.size() != 1) {
              promise.deliver(error_reply(make_error(ErrorCode::invariant_violated,
                                                     "the authorization owner answered another count", "prompt")));
              return;
            }
            then(answers[0]);
          },
          [promise](caf::error& e) mutable {
            promise.deliver(error_reply(make_error(ErrorCode::rpc_failed, caf::to_string(e), "authorization")));
          });
}

template <class R>
void deliver_prompt(ReuseSelf self, uint64_t session, caf::typed_response_promise<wire_bytes> promise,
                    const TraceContext& trace, std::chrono::steady_clock::time_point started,
                    const Result<typename R::Receipt>& receipt) {
  auto& st = self->state;
  if (st.obs.latency) st.obs.latency->record(R::id.value, std::chrono::steady_clock::now() - started);
  if (!receipt.ok()) {
    log_refused(st.obs.log, "reuse", session, trace, receipt.error());
    promise.deliver(error_reply(receipt.error()));
    return;
  }
  promise.deliver(to_wire(codec::encode(*receipt)));
}

caf::result<wire_bytes> serve_prompt_schema(ReuseSelf self, uint64_t session, PromptSchemaRequest request) {
  auto promise = self->make_response_promise<wire_bytes>();
  const auto started = std::chrono::steady_clock::now();
  authorize_prompt(self, session, request, promise, [self, session, promise, started, request](ReuseKeyAnswer& key) {
    deliver_prompt<PromptSchemaRoute>(self, session, promise, request.trace, started,
                                      self->state.facts.prompts->register_schema(key, request));
  });
  return promise;
}

caf::result<wire_bytes> serve_prompt_assemble(ReuseSelf self, uint64_t session, PromptAssembleRequest request) {
  auto promise = self->make_response_promise<wire_bytes>();
  const auto started = std::chrono::steady_clock::now();
  authorize_prompt(self, session, request, promise, [self, session, promise, started, request](ReuseKeyAnswer& key) {
    auto& st = self->state;
    Result<PromptModuleService::Assembly> assembly = st.facts.prompts->assemble(key, request);
    if (!assembly.ok()) {
      deliver_prompt<PromptAssembleRoute>(self, session, promise, request.trace, started, assembly.error());
      return;
    }
    // Step 4: the session's leases on every hit's blocks, all or none per module.
    auto a = std::make_shared<PromptModuleService::Assembly>(std::move(assembly).value());
    auto finish = [self, session, promise, started, trace = request.trace,
                   a](const std::vector<ReuseLeaseAnswer>& answers) mutable {
      std::vector<LeaseId> unused;
      PromptAssemblyReceipt receipt = self->state.facts.prompts->leased(std::move(*a), answers, unused);
      if (!unused.empty())
        self->request(self->state.owners.allocator, caf::infinite, unlease_atom::value, session, trace, unused)
            .then([](std::vector<uint8_t>&) {}, [](caf::error&) {});
      deliver_prompt<PromptAssembleRoute>(self, session, promise, trace, started, std::move(receipt));
    };
    if (a->leases.empty()) {
      finish({});
      return;
    }
    self->request(st.owners.allocator, caf::infinite, reuse_atom::value, session, request.trace, a->leases)
        .then([finish](std::vector<ReuseLeaseAnswer>& answers) mutable { finish(answers); },
              [finish](caf::error&) mutable { finish({}); });
  });
  return promise;
}

caf::result<wire_bytes> serve_prompt_publish(ReuseSelf self, uint64_t session, PromptModulePublishRequest request) {
  auto promise = self->make_response_promise<wire_bytes>();
  const auto started = std::chrono::steady_clock::now();
  authorize_prompt(self, session, request, promise, [self, session, promise, started, request](ReuseKeyAnswer& key) {
    auto& st = self->state;
    auto refuse = [self, session, promise, started, trace = request.trace](const Error& e) mutable {
      deliver_prompt<PromptPublishRoute>(self, session, promise, trace, started, e);
    };
    Result<PromptModuleService::Publication> prepared = st.facts.prompts->prepare_publish(key, request);
    if (!prepared.ok()) return refuse(prepared.error());
    auto p = std::make_shared<PromptModuleService::Publication>(std::move(prepared).value());
    // The publisher's own table (the allocator answers only a request this session holds) ...
    self->request(st.owners.allocator, caf::infinite, table_atom::value, session, p->request.value)
        .then(
            [self, session, promise, started, trace = request.trace, p, refuse](BlockTableView& view) mutable {
              Result<std::vector<PhysicalBlockHandle>> handles = self->state.facts.prompts->module_blocks(*p, view);
              if (!handles.ok()) return refuse(handles.error());
              // ... then the node's leases on the module's blocks, which outlive the session.
              auto hs = std::make_shared<std::vector<PhysicalBlockHandle>>(std::move(handles).value());
              self->request(self->state.owners.allocator, caf::infinite, lease_atom::value, *hs)
                  .then(
                      [self, session, promise, started, trace, p, hs](std::vector<std::optional<LeaseId>>& leases) {
                        PromptModuleService::Published done =
                            self->state.facts.prompts->commit_publish(std::move(*p), std::move(*hs), leases, trace);
                        return_node_leases(self, done.released);
                        deliver_prompt<PromptPublishRoute>(
                            self, session, promise, trace, started,
                            done.receipt ? Result<PromptModulePublishReceipt>(std::move(*done.receipt))
                                         : Result<PromptModulePublishReceipt>(*done.error));
                      },
                      [refuse](caf::error& e) mutable {
                        refuse(make_error(ErrorCode::rpc_failed, caf::to_string(e), "allocator"));
                      });
            },
            [refuse](caf::error& e) mutable {
              refuse(make_error(ErrorCode::rpc_failed, caf::to_string(e), "allocator"));
            });
  });
  return promise;
}

reuse_actor spawn_reuse_actor(caf::actor_system& system, OwnerHandles owners, ReuseNodeFacts facts, Observability obs) {
  auto behavior = [](ReuseSelf self, OwnerHandles o, ReuseNodeFacts f, Observability ob) -> reuse_actor::behavior_type {
    self->state.owners = std::move(o);
    self->state.facts = std::move(f);
    self->state.obs = std::move(ob);
    return {
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::reuse>(
              st.obs, route, session, bytes,
              overloaded{
                  [&](SessionSaveRequest r) { return serve_tier<SessionSaveRoute>(self, session, std::move(r)); },
                  [&](SessionResumeRequest r) { return serve_tier<SessionResumeRoute>(self, session, std::move(r)); },
                  [&](PromptSchemaRequest r) { return serve_prompt_schema(self, session, std::move(r)); },
                  [&](PromptAssembleRequest r) { return serve_prompt_assemble(self, session, std::move(r)); },
                  [&](PromptModulePublishRequest r) { return serve_prompt_publish(self, session, std::move(r)); },
                  [&](ReuseBatch batch) {
                    ++st.batches;
                    ++st.in_flight[session];
                    st.ops += batch.ops.size();
                    auto run = std::make_shared<ReuseRun>(
                        ReuseRun{SessionId{session},
                                 ReuseBatchRun(std::move(batch), st.facts.pools, st.facts.block_tokens,
                                               st.facts.cache_groups, st.facts.faults.get()),
                                 self->make_response_promise<wire_bytes>()});
                    run->core.bind(st.open, SessionId{session});
                    drive(
                        run,
                        [self, run](const ReuseBatchRun::Request& request, auto resume) {
                          send_stage(self, run, request, resume);
                        },
                        [self](const RunPtr& r) { finish(self, r); });
                    return caf::result<wire_bytes>(run->promise);
                  }});
        },
        [self](stats_atom, bool validate) -> wire_bytes {
          return to_wire(codec::encode(reuse_stats(self->state, validate)));
        },
        [self](purge_atom, const std::string& namespace_name, uint64_t generation, bool revoke) -> uint64_t {
          auto& st = self->state;
          const NamespaceGeneration g{generation};
          if (!revoke) return st.open.count_generation(namespace_name, g);
          // Each attempt's leases go back under the session that holds them,
          // as its own release op would return them.
          const auto revoked = st.open.revoke_generation(namespace_name, g);
          for (const auto& [session, leases] : revoked) {
            ReuseBatchRun::LeaseReturn back;
            for (LeaseId l : leases) back.add(l);
            if (!back.empty()) return_leases(self, session, TraceContext{}, back);
          }
          st.receipts_revoked += revoked.size();
          return revoked.size();
        },
        [self](purge_atom, const std::string& namespace_name, uint64_t generation) -> uint64_t {
          // Step 6 of a purge (0x0CE): the session tier's saves of g go, and
          // so do the prompt modules computed under g (copies of its K/V
          // outside the index, held by the node's leases).
          auto& st = self->state;
          const NamespaceGeneration g{generation};
          uint64_t copies = st.facts.tier ? st.facts.tier->retire(namespace_name, g) : 0;
          if (st.facts.prompts) {
            const std::vector<LeaseId> released = st.facts.prompts->retire(namespace_name, g);
            return_node_leases(self, released);
            copies += released.size();
          }
          return copies;
        },
        [self](end_atom, uint64_t session) {
          // The owners reclaim the leases of its open attempts themselves.
          self->state.open.end_session(SessionId{session});
          if (self->state.in_flight.contains(session)) self->state.ended.insert(session);
        },
    };
  };
  return system.spawn(behavior, std::move(owners), std::move(facts), std::move(obs));
}

}  // namespace kvrt::actors
