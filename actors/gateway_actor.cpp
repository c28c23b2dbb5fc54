// The node's front door. A worker says hello with its token and an
// anchor actor; the gateway has the authorization owner open a session,
// spawns the session actor, and monitors the anchor. When the anchor goes
// down (the worker exited, was killed, or stopped answering heartbeats) every
// owner ends that session's holdings through its normal operations, each
// with its receipt, and the session actor stops.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "actors/owner_actors.hpp"
#include "actors/owner_routes.hpp"
#include "services/authorization/bearer_token.hpp"

namespace kvrt::actors {

namespace {

struct GatewayState {
  static inline const char* name = "gateway";
  std::vector<OwnerHandles> domains;  // [trust domain]: the owners serving its sessions
  NodeFacts facts;
  Observability obs;
  struct Connected {
    SessionId session;
    session_actor actor;
    std::string channel_ticket;
    uint32_t domain = 0;
    caf::actor_addr anchor;  // the worker's anchor; null for a session opened on the channel
  };
  std::map<uint64_t, Connected> workers;            // live sessions, by session id
  std::map<caf::actor_addr, uint64_t> anchors;      // middleman sessions: anchor -> session id
  std::map<std::string, uint64_t> channel_tickets;  // live sessions' tickets -> session id
  uint64_t channel_hellos = 0;                      // sessions opened on the channel
  uint64_t sessions_opened = 0, sessions_reclaimed = 0, sessions_lost = 0, hellos_refused = 0;
  uint64_t sessions_silenced = 0;  // channel sessions the liveness watch ended: heartbeats missed
  uint64_t channels_attached = 0, channel_attaches_refused = 0;
};

using GatewaySelf = gateway_actor::stateful_pointer<GatewayState>;

OwnerStats gateway_stats(const GatewayState& st) {
  OwnerStats out;
  out.owner = "node";
  out.validate_ok = true;
  out.values = {
      {"workers_connected", static_cast<int64_t>(st.workers.size())},
      {"sessions_opened", static_cast<int64_t>(st.sessions_opened)},
      {"sessions_opened_on_channel", static_cast<int64_t>(st.channel_hellos)},
      {"sessions_reclaimed", static_cast<int64_t>(st.sessions_reclaimed)},
      {"sessions_lost", static_cast<int64_t>(st.sessions_lost)},
      {"sessions_silenced", static_cast<int64_t>(st.sessions_silenced)},
      {"hellos_refused", static_cast<int64_t>(st.hellos_refused)},
      {"channels_attached", static_cast<int64_t>(st.channels_attached)},
      {"channel_attaches_refused", static_cast<int64_t>(st.channel_attaches_refused)},
      // Where the pools live ([node] pool_backend): GPU pools carry a CUDA IPC handle.
      {"pools_on_gpu",
       static_cast<int64_t>(std::count_if(st.facts.pools.begin(), st.facts.pools.end(),
                                          [](const PoolAttachment& p) { return !p.cuda_ipc_handle.empty(); }))},
      {"pools_in_shared_memory",
       static_cast<int64_t>(std::count_if(st.facts.pools.begin(), st.facts.pools.end(),
                                          [](const PoolAttachment& p) { return p.cuda_ipc_handle.empty(); }))}};
  if (st.facts.process_values)
    for (StatValue& v : st.facts.process_values()) out.values.push_back(std::move(v));
  return out;
}

// Ends a session: every owner releases its holdings, in Owner order
// (services/session/routes.hpp says why that order), and the session actor
// stops. `lost`: the worker went away mid-work rather than closing.
void end_session(GatewaySelf self, uint64_t session, bool lost, const std::string& why) {
  auto& st = self->state;
  const auto it = st.workers.find(session);
  if (it == st.workers.end()) return;
  if (lost) ++st.sessions_lost;
  if (lost)
    logger_or_default(st.obs.log)
        .warn("actor=gateway session={} worker lost ({}): reclaiming its holdings", session, why);
  else
    logger_or_default(st.obs.log).info("actor=gateway session={} closed: releasing what it still holds", session);
  for (Owner o : kOwners)
    if (owner_interface owner = st.domains.at(it->second.domain).of(o)) self->send(owner, end_atom::value, session);
  self->unlink_from(it->second.actor);
  // The session actor's exit also closes the session's channels (their
  // writers monitor it); the ticket stops naming anything now.
  self->send_exit(it->second.actor, caf::exit_reason::user_shutdown);
  st.channel_tickets.erase(it->second.channel_ticket);
  if (it->second.anchor) st.anchors.erase(it->second.anchor);
  st.workers.erase(it);
  ++st.sessions_reclaimed;
}

void end_worker(GatewaySelf self, const caf::actor_addr& anchor, const caf::error& reason) {
  const auto it = self->state.anchors.find(anchor);
  if (it == self->state.anchors.end()) return;
  // A worker that closed its client exits its anchor with user_shutdown; any
  // other reason (remote_link_unreachable: killed, crashed, or silent past
  // the heartbeat timeout) is a worker lost mid-work.
  const bool closed = reason == caf::exit_reason::user_shutdown || reason == caf::exit_reason::normal;
  end_session(self, it->second, !closed, caf::to_string(reason));
}

// A hello the authorization owner answered: the session's receipt completed
// with the node's facts and its actor spawned, or nothing (refused).
// `anchor`: the middleman worker's anchor, monitored; null for a session
// opened on the channel, which the channel server ends.
std::optional<std::pair<SessionReceipt, session_actor>> open_session(GatewaySelf self, const wire_bytes& reply,
                                                                     const caf::actor& anchor) {
  auto& st = self->state;
  Result<SessionReceipt> receipt = codec::decode<SessionReceipt>(as_span(reply));
  if (!receipt.ok()) {
    ++st.hellos_refused;
    return std::nullopt;
  }
  receipt->layout_sha256 = st.facts.layout_sha256;
  receipt->block_tokens = st.facts.block_tokens;
  // K/V is handed only to a principal that may serve a namespace: an admin
  // (an operator changes namespaces and arms fault points, never reads rows)
  // or a principal allowed no namespace gets no segment name and no CUDA
  // IPC handle. With pools per trust domain, only the principal's domain's.
  const uint32_t domain = st.facts.domains.domain_of_namespaces(receipt->allowed_namespaces);
  if (!receipt->admin && !receipt->allowed_namespaces.empty()) receipt->pools = st.facts.domain_pools.at(domain);
  receipt->reuse_policy_id = st.facts.reuse_policy_id;
  std::string ticket;
  if (!st.facts.channel_socket.empty()) {
    Result<std::string> secret = random_secret_hex();
    // Without randomness the session still works, through the middleman only.
    if (secret.ok()) {
      ticket = std::move(*secret);
      receipt->channel_socket = st.facts.channel_socket;
      receipt->channel_ticket = ticket;
      st.channel_tickets[ticket] = receipt->session.value;
    }
  }
  session_actor session =
      spawn_session_actor(self->system(), receipt->session, receipt->admin ? RouteAccess::admin : RouteAccess::worker,
                          st.domains.at(domain));
  // Linked: when the gateway stops, every session stops with it.
  self->link_to(session);
  st.workers[receipt->session.value] =
      GatewayState::Connected{receipt->session, session, ticket, domain, anchor ? anchor.address() : caf::actor_addr{}};
  if (anchor) {
    st.anchors[anchor.address()] = receipt->session.value;
    self->monitor(anchor);
  }
  ++st.sessions_opened;
  return std::make_pair(std::move(*receipt), session);
}

// Whether owner `o` of domain `d` is asked for statistics: the owners every
// domain shares (authorization, mapper) once, through domain 0.
bool reported(Owner o, uint32_t d) { return d == 0 || (o != Owner::authorization && o != Owner::mapper); }

// Every served owner's statistics, in Owner order, then the node's own
// (sessions, channels, pools) with the reuse coordinators' counts folded in
// as reuse_<name> (summed over the trust domains): one NodeStatsReceipt.
// With several domains each domain's owner is named "<owner>@<domain>"
// ("@default" for the namespaces that name none). An owner that does not
// answer is reported as failing validation, with why.
caf::result<wire_bytes> collect_stats(GatewaySelf self, bool validate) {
  const size_t domains = self->state.domains.size();
  struct Collected {
    std::vector<std::optional<OwnerStats>> owners;  // [domain * kOwnerCount + owner]
    size_t remaining = 0;
  };
  auto rp = self->make_response_promise<wire_bytes>();
  auto collected = std::make_shared<Collected>();
  collected->owners.resize(domains * kOwnerCount);
  for (uint32_t d = 0; d < domains; ++d)
    for (Owner o : kOwners) collected->remaining += reported(o, d) && self->state.domains[d].of(o) ? 1 : 0;
  auto finish = [self, rp, collected, domains]() mutable {
    if (--collected->remaining > 0) return;
    NodeStatsReceipt out;
    OwnerStats node = gateway_stats(self->state);
    std::map<std::string, int64_t> reuse;  // summed over the domains, in name order
    std::vector<std::string> reuse_order;
    for (Owner o : kOwners)
      for (uint32_t d = 0; d < domains; ++d) {
        std::optional<OwnerStats>& s = collected->owners[d * kOwnerCount + static_cast<size_t>(o)];
        if (!s) continue;
        if (o != Owner::reuse) {
          if (domains > 1 && o != Owner::authorization && o != Owner::mapper) {
            const std::string& name = self->state.facts.domains.name(d);
            s->owner += "@" + (name.empty() ? std::string("default") : name);
          }
          out.owners.push_back(std::move(*s));
          continue;
        }
        for (const StatValue& v : s->values) {
          if (!reuse.contains(v.name)) reuse_order.push_back(v.name);
          reuse[v.name] += v.value;
        }
        node.validated = node.validated || s->validated;
        if (!s->validate_ok && node.validate_ok) {
          node.validate_ok = false;
          node.validate_error = "reuse: " + s->validate_error;
        }
      }
    for (const std::string& name : reuse_order) node.values.push_back(StatValue{"reuse_" + name, reuse[name]});
    out.owners.push_back(std::move(node));
    rp.deliver(to_wire(codec::encode(out)));
  };
  for (uint32_t d = 0; d < domains; ++d)
    for (Owner o : kOwners) {
      owner_interface owner = self->state.domains[d].of(o);
      if (!owner || !reported(o, d)) continue;
      const size_t slot = d * kOwnerCount + static_cast<size_t>(o);
      self->request(owner, caf::infinite, stats_atom::value, validate)
          .then(
              [collected, finish, o, slot](wire_bytes& b) mutable {
                Result<OwnerStats> s = codec::decode<OwnerStats>(as_span(b));
                if (!s.ok()) {
                  OwnerStats bad;
                  bad.owner = std::string(owner_name(o));
                  bad.validate_ok = false;
                  bad.validate_error = "undecodable statistics: " + s.error().describe();
                  s = std::move(bad);
                }
                collected->owners[slot] = std::move(*s);
                finish();
              },
              [collected, finish, o, slot](caf::error& e) mutable {
                OwnerStats bad;
                bad.owner = std::string(owner_name(o));
                bad.validate_ok = false;
                bad.validate_error = "unreachable: " + caf::to_string(e);
                collected->owners[slot] = std::move(bad);
                finish();
              });
    }
  return rp;
}

}  // namespace

gateway_actor spawn_gateway_actor(caf::actor_system& system, std::vector<OwnerHandles> domains, NodeFacts facts,
                                  Observability obs) {
  auto behavior = [](GatewaySelf self, std::vector<OwnerHandles> handles, NodeFacts node_facts,
                     Observability o) -> gateway_actor::behavior_type {
    self->state.domains = std::move(handles);
    self->state.facts = std::move(node_facts);
    self->state.obs = std::move(o);
    self->set_down_handler([self](caf::down_msg& dm) { end_worker(self, dm.source, dm.reason); });
    return {
        [self](hello_atom, wire_bytes& bytes, caf::actor anchor) -> caf::result<wire_bytes, caf::actor> {
          auto rp = self->make_response_promise<wire_bytes, caf::actor>();
          self->request(self->state.domains.front().authorization, caf::infinite, hello_atom::value, std::move(bytes))
              .then(
                  [self, rp, anchor](wire_bytes& reply) mutable {
                    if (!anchor) {
                      ++self->state.hellos_refused;
                      rp.deliver(std::move(reply), caf::actor{});
                      return;
                    }
                    auto opened = open_session(self, reply, anchor);
                    if (!opened) {
                      rp.deliver(std::move(reply), caf::actor{});
                      return;
                    }
                    rp.deliver(to_wire(codec::encode(opened->first)), caf::actor_cast<caf::actor>(opened->second));
                  },
                  [self, rp](caf::error& e) mutable {
                    ++self->state.hellos_refused;
                    rp.deliver(to_wire(codec::encode(ErrorMessage{
                                   make_error(ErrorCode::rpc_failed, "authorization: " + caf::to_string(e), "hello")})),
                               caf::actor{});
                  });
          return rp;
        },
        [self](channel_hello_atom, wire_bytes& bytes) -> caf::result<wire_bytes, caf::actor, uint64_t> {
          auto rp = self->make_response_promise<wire_bytes, caf::actor, uint64_t>();
          self->request(self->state.domains.front().authorization, caf::infinite, hello_atom::value, std::move(bytes))
              .then(
                  [self, rp](wire_bytes& reply) mutable {
                    auto opened = open_session(self, reply, caf::actor{});
                    if (!opened) {
                      rp.deliver(std::move(reply), caf::actor{}, uint64_t{0});
                      return;
                    }
                    ++self->state.channel_hellos;
                    rp.deliver(to_wire(codec::encode(opened->first)), caf::actor_cast<caf::actor>(opened->second),
                               opened->first.session.value);
                  },
                  [self, rp](caf::error& e) mutable {
                    ++self->state.hellos_refused;
                    rp.deliver(to_wire(codec::encode(ErrorMessage{
                                   make_error(ErrorCode::rpc_failed, "authorization: " + caf::to_string(e), "hello")})),
                               caf::actor{}, uint64_t{0});
                  });
          return rp;
        },
        [self](channel_closed_atom, uint64_t session, bool lost) {
          if (lost && self->state.workers.contains(session)) ++self->state.sessions_silenced;
          end_session(self, session, lost, lost ? "its session channel went silent" : "its session channel closed");
        },
        [self](attach_atom, const std::string& ticket) -> caf::result<caf::actor, uint64_t> {
          auto& st = self->state;
          const auto t = st.channel_tickets.find(ticket);
          const auto w = t == st.channel_tickets.end() ? st.workers.end() : st.workers.find(t->second);
          if (w == st.workers.end()) {
            ++st.channel_attaches_refused;
            return {caf::actor{}, uint64_t{0}};
          }
          ++st.channels_attached;
          return {caf::actor_cast<caf::actor>(w->second.actor), w->second.session.value};
        },
        [self](stats_atom, bool validate) -> caf::result<wire_bytes> { return collect_stats(self, validate); },
        [](ping_atom) { return true; },
    };
  };
  return system.spawn(behavior, std::move(domains), std::move(facts), std::move(obs));
}

}  // namespace kvrt::actors
