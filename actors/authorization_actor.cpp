// The namespace / authorization owner's actor. A grant reaches the index
// owner and the allocator owner before the worker hears of it: the grant
// message is enqueued in their mailboxes before this actor replies, so any
// lookup or allocation the worker sends afterwards finds it there (CAF
// delivers in order per sender, and a local send enqueues at once). The
// allocator charges allocations to the namespace (block quotas).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "actors/run_driver.hpp"
#include "services/authorization/node_purge.hpp"
#include "services/common/overloaded.hpp"

namespace kvrt::actors {

namespace {

// A purge route in progress: its run and the admin's pending answer.
struct PurgeInProgress {
  NodePurge run;
  caf::typed_response_promise<wire_bytes> promise;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// One trust domain's owners as this actor reaches them ([node]
// domain_pools; one domain otherwise).
struct DomainPeers {
  prefix_actor prefix;
  allocator_actor allocator;  // grants (block quotas), a purge's step 5
  reuse_actor reuse;          // a purge's steps 4 and 7
};

struct AuthorizationActorState {
  static inline const char* name = "authorization";
  std::shared_ptr<AuthorizationService> service;
  std::vector<DomainPeers> domains;
  TrustDomainPlan plan = TrustDomainPlan::shared();
  Observability obs;
  // The owners of the namespace's trust domain.
  const DomainPeers& of(const std::string& namespace_name) const {
    return domains.at(plan.domain_of_namespace(namespace_name));
  }
  bool wired() const {
    return std::all_of(domains.begin(), domains.end(), [](const DomainPeers& d) { return d.allocator && d.reuse; });
  }
  std::map<uint64_t, std::shared_ptr<PurgeInProgress>> purges;  // by purge id
};

using AuthorizationSelf = authorization_actor::stateful_pointer<AuthorizationActorState>;

uint64_t steady_us() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void finish_purge(AuthorizationSelf self, const std::shared_ptr<PurgeInProgress>& p) {
  auto& st = self->state;
  Result<NamespacePurgeReceipt> r = p->run.result();
  if (r.ok()) {
    logger_or_default(st.obs.log)
        .info(
            "actor=authorization namespace {} purged: generation {} -> {} in {} us, {} index page(s) dropped, {} "
            "receipt(s) drained, {} revoked, {} block(s) marked for overwrite",
            r->namespace_name, r->purged_generation.value, r->successor_generation.value, r->duration_us,
            r->dropped_index_pages, r->receipts_drained, r->receipts_revoked, r->blocks_marked_for_overwrite);
    p->promise.deliver(to_wire(codec::encode(*r)));
  } else {
    logger_or_default(st.obs.log).warn("actor=authorization purge stopped open: {}", r.error().describe());
    p->promise.deliver(error_reply(r.error()));
  }
  record_latency(st.obs, PurgeRoute::id, p->started);
}

// Performs the run's next action and comes back with its answer, until the
// run finished (node_purge.hpp has the steps).
void drive_purge(AuthorizationSelf self, uint64_t id) {
  auto& st = self->state;
  const auto it = st.purges.find(id);
  if (it == st.purges.end()) return;
  std::shared_ptr<PurgeInProgress> p = it->second;
  if (p->run.finished()) {
    finish_purge(self, p);
    st.purges.erase(id);
    return;
  }
  auto answered = [self, p, id](uint64_t count) {
    p->run.answer(count, steady_us());
    drive_purge(self, id);
  };
  auto failed = [self, p, id](const char* owner) {
    return [self, p, id, owner](caf::error& e) {
      p->run.failed(transport_error(owner, e), steady_us());
      drive_purge(self, id);
    };
  };
  std::visit(
      overloaded{
          [&](const PurgeIndexAdvance& a) {
            self->request(st.of(a.namespace_name).prefix, caf::infinite, purge_atom::value, a.namespace_name,
                          a.successor.value)
                .then(answered, failed("prefix_index"));
          },
          [&](const PurgeReceiptCount& c) {
            self->request(st.of(c.namespace_name).reuse, caf::infinite, purge_atom::value, c.namespace_name,
                          c.generation.value, c.revoke)
                .then(answered, failed("reuse"));
          },
          [&](const PurgeBlockOverwrite& o) {
            self->request(st.of(o.namespace_name).allocator, caf::infinite, purge_atom::value, o.namespace_name)
                .then(answered, failed("allocator"));
          },
          [&](const PurgeTierRetire& t) {
            self->request(st.of(t.namespace_name).reuse, caf::infinite, purge_atom::value, t.namespace_name,
                          t.generation.value)
                .then(answered, failed("reuse"));
          },
          [&](const PurgeWait& w) { self->delayed_send(self, std::chrono::milliseconds(w.ms), purge_atom::value, id); },
      },
      *p->run.next());
}

}  // namespace

authorization_actor spawn_authorization_actor(caf::actor_system& system, std::shared_ptr<AuthorizationService> service,
                                              std::vector<prefix_actor> prefixes, TrustDomainPlan domains,
                                              Observability obs) {
  auto behavior = [](AuthorizationSelf self, std::shared_ptr<AuthorizationService> svc, std::vector<prefix_actor> pre,
                     TrustDomainPlan plan, Observability o) -> authorization_actor::behavior_type {
    self->state.service = std::move(svc);
    for (prefix_actor& p : pre) self->state.domains.push_back(DomainPeers{std::move(p), {}, {}});
    self->state.plan = std::move(plan);
    self->state.obs = std::move(o);
    return {
        [self](hello_atom, const wire_bytes& bytes) -> wire_bytes {
          auto& st = self->state;
          Result<HelloRequest> hello = codec::decode<HelloRequest>(as_span(bytes));
          if (!hello.ok()) {
            log_rejected(st.obs.log, "authorization", 0, hello.error());
            return error_reply(hello.error());
          }
          Result<OpenedSession> opened = st.service->open_session(*hello);
          if (!opened.ok()) {
            logger_or_default(st.obs.log)
                .warn("actor=authorization worker={} refused: {}", hello->worker_name, opened.error().describe());
            return error_reply(opened.error());
          }
          logger_or_default(st.obs.log)
              .info("actor=authorization session={} opened for principal {} (worker {}, pid {})", opened->session.value,
                    opened->principal, hello->worker_name, hello->process_id);
          SessionReceipt r;
          r.session = opened->session;
          r.principal = opened->principal;
          r.allowed_namespaces = opened->allowed_namespaces;
          r.admin = opened->admin;
          return to_wire(codec::encode(r));
        },
        [self](route_atom, uint16_t route, uint64_t session, const wire_bytes& bytes) -> caf::result<wire_bytes> {
          auto& st = self->state;
          return serve_owner_routes<Owner::authorization>(
              st.obs, route, session, bytes,
              overloaded{
                  [&](const AuthorizeRequest& req) -> Result<NamespaceGrantReceipt> {
                    Result<IssuedGrant> grant = st.service->authorize(SessionId{session}, req);
                    if (!grant.ok()) return grant.error();
                    // Enqueued before the reply: see the top of this file.
                    const DomainPeers& peers = st.of(req.namespace_name);
                    self->send(peers.prefix, grant_atom::value, session, grant->for_indexes);
                    if (peers.allocator) self->send(peers.allocator, grant_atom::value, session, grant->for_indexes);
                    return grant->receipt;
                  },
                  [&](const NamespaceInvalidateRequest& req) -> Result<NamespaceInvalidationReceipt> {
                    Result<NamespaceInvalidationReceipt> r = st.service->apply(SessionId{session}, req);
                    if (!r.ok()) return r;
                    // Enqueued before the reply and before any grant of the
                    // new generation: the index ends the old grants first.
                    self->send(st.of(r->namespace_name).prefix, advance_atom::value, r->namespace_name,
                               r->new_generation.value);
                    logger_or_default(st.obs.log)
                        .info(
                            "actor=authorization namespace {} invalidated ({}): generation {} -> {}, {} grant(s) "
                            "ended",
                            r->namespace_name, to_string(r->cause), r->old_generation.value, r->new_generation.value,
                            r->ended_grants);
                    return r;
                  },
                  [&](const NamespaceStatusRequest& req) { return st.service->apply(SessionId{session}, req); },
                  [&](const PoolDescriptorRequest& req) { return st.service->apply(SessionId{session}, req); },
                  [&](const NamespacePurgeRequest& req) -> caf::result<wire_bytes> {
                    if (!st.wired())
                      return error_reply(make_error(ErrorCode::node_unreachable,
                                                    "the node is still starting: its purge owners are not wired yet",
                                                    "route"));
                    Result<NodePurge> run =
                        NodePurge::begin(*st.service, SessionId{session}, req, steady_us(),
                                         [&st](PurgeId id) { return st.purges.contains(id.value); });
                    if (!run.ok()) {
                      log_refused(st.obs.log, "authorization", session, req.trace, run.error());
                      return error_reply(run.error());
                    }
                    const uint64_t id = run->id().value;
                    auto p = std::make_shared<PurgeInProgress>(
                        PurgeInProgress{std::move(run).value(), self->make_response_promise<wire_bytes>()});
                    st.purges.emplace(id, p);
                    caf::result<wire_bytes> answer(p->promise);
                    drive_purge(self, id);
                    return answer;
                  },
              });
        },
        [self](purge_atom, uint32_t domain, const allocator_actor& allocator, const reuse_actor& reuse) {
          if (domain >= self->state.domains.size()) return;
          self->state.domains[domain].allocator = allocator;
          self->state.domains[domain].reuse = reuse;
        },
        [self](purge_atom, uint64_t id) {
          // A step-4 wait is over: count g's receipts again.
          const auto it = self->state.purges.find(id);
          if (it == self->state.purges.end()) return;
          it->second->run.answer(0, steady_us());
          drive_purge(self, id);
        },
        [self](reuse_atom, uint64_t session, TraceContext trace, const std::vector<ReuseKeyRequest>& requests) {
          TraceSlice slice(self->state.obs.trace, "authorization", "reuse.keys", trace);
          std::vector<ReuseKeyAnswer> answers;
          answers.reserve(requests.size());
          for (const ReuseKeyRequest& r : requests)
            answers.push_back(self->state.service->reuse_key(SessionId{session}, r));
          return answers;
        },
        [self](stats_atom, bool validate) { return stats_reply(*self->state.service, validate); },
        [self](end_atom, uint64_t session) {
          const Status st = self->state.service->end_session(SessionId{session});
          if (!st.ok())
            logger_or_default(self->state.obs.log)
                .warn("actor=authorization session={} end: {}", session, st.error().describe());
        },
    };
  };
  return system.spawn(behavior, std::move(service), std::move(prefixes), std::move(domains), std::move(obs));
}

}  // namespace kvrt::actors
