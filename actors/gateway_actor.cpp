// The node's front door (issue 5). A worker says hello with its token and an
// anchor actor; the gateway has the authorization owner open a session,
// spawns the session actor, and monitors the anchor. When the anchor goes
// down (the worker exited, was killed, or stopped answering heartbeats) every
// owner ends that session's holdings through its normal operations, each
// with its receipt, and the session actor stops.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "actors/owner_actors.hpp"
#include "actors/wire_bytes.hpp"
#include "schema/codecs.hpp"
#include "services/authorization/bearer_token.hpp"

namespace kvrt::actors {

namespace {

struct GatewayState {
  static inline const char* name = "gateway";
  OwnerHandles owners;
  NodeFacts facts;
  Observability obs;
  struct Connected {
    SessionId session;
    session_actor actor;
    std::string channel_ticket;
  };
  std::map<caf::actor_addr, Connected> workers;            // by anchor
  std::map<std::string, caf::actor_addr> channel_tickets;  // live sessions' tickets -> anchor
  uint64_t sessions_opened = 0, sessions_reclaimed = 0, hellos_refused = 0;
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
      {"sessions_reclaimed", static_cast<int64_t>(st.sessions_reclaimed)},
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
  return out;
}

void end_worker(GatewaySelf self, const caf::actor_addr& anchor, const caf::error& reason) {
  auto& st = self->state;
  const auto it = st.workers.find(anchor);
  if (it == st.workers.end()) return;
  const uint64_t session = it->second.session.value;
  // A worker that closed its client exits its anchor with user_shutdown; any
  // other reason (remote_link_unreachable: killed, crashed, or silent past
  // the heartbeat timeout) is a worker lost mid-work.
  const bool closed = reason == caf::exit_reason::user_shutdown || reason == caf::exit_reason::normal;
  if (closed)
    logger_or_default(st.obs.log).info("actor=gateway session={} closed: releasing what it still holds", session);
  else
    logger_or_default(st.obs.log)
        .warn("actor=gateway session={} worker lost ({}): reclaiming its holdings", session, caf::to_string(reason));
  // Order: the reuse coordinator first (a batch of the session still in
  // flight sees the end before any owner answer that the end could follow,
  // and returns what it took), then the indexes (no new lookups for the
  // session), then the allocator (requests and leases), then the grants,
  // then the mapper's slots.
  if (st.owners.reuse) self->send(st.owners.reuse, end_atom::value, session);
  self->send(st.owners.prefix, end_atom::value, session);
  self->send(st.owners.allocator, end_atom::value, session);
  self->send(st.owners.authorization, end_atom::value, session);
  if (st.owners.mapper) self->send(st.owners.mapper, end_atom::value, session);
  self->unlink_from(it->second.actor);
  // The session actor's exit also closes the session's channels (their
  // writers monitor it); the ticket stops naming anything now.
  self->send_exit(it->second.actor, caf::exit_reason::user_shutdown);
  st.channel_tickets.erase(it->second.channel_ticket);
  st.workers.erase(it);
  ++st.sessions_reclaimed;
}

}  // namespace

gateway_actor spawn_gateway_actor(caf::actor_system& system, OwnerHandles owners, NodeFacts facts, Observability obs) {
  auto behavior = [](GatewaySelf self, OwnerHandles handles, NodeFacts node_facts,
                     Observability o) -> gateway_actor::behavior_type {
    self->state.owners = std::move(handles);
    self->state.facts = std::move(node_facts);
    self->state.obs = std::move(o);
    self->set_down_handler([self](caf::down_msg& dm) { end_worker(self, dm.source, dm.reason); });
    return {
        [self](hello_atom, wire_bytes& bytes, caf::actor anchor) -> caf::result<wire_bytes, caf::actor> {
          auto rp = self->make_response_promise<wire_bytes, caf::actor>();
          self->request(self->state.owners.authorization, caf::infinite, hello_atom::value, std::move(bytes))
              .then(
                  [self, rp, anchor](wire_bytes& reply) mutable {
                    auto& st = self->state;
                    Result<SessionReceipt> receipt = codec::decode<SessionReceipt>(as_span(reply));
                    if (!receipt.ok() || !anchor) {
                      ++st.hellos_refused;
                      rp.deliver(std::move(reply), caf::actor{});
                      return;
                    }
                    receipt->layout_sha256 = st.facts.layout_sha256;
                    receipt->block_tokens = st.facts.block_tokens;
                    receipt->pools = st.facts.pools;
                    std::string ticket;
                    if (!st.facts.channel_socket.empty()) {
                      Result<std::string> secret = random_secret_hex();
                      // Without randomness the session still works, through the middleman only.
                      if (secret.ok()) {
                        ticket = std::move(*secret);
                        receipt->channel_socket = st.facts.channel_socket;
                        receipt->channel_ticket = ticket;
                        st.channel_tickets[ticket] = anchor.address();
                      }
                    }
                    session_actor session = spawn_session_actor(self->system(), receipt->session, st.owners);
                    // Linked: when the gateway stops, every session stops with it.
                    self->link_to(session);
                    st.workers[anchor.address()] = GatewayState::Connected{receipt->session, session, ticket};
                    ++st.sessions_opened;
                    self->monitor(anchor);
                    rp.deliver(to_wire(codec::encode(*receipt)), caf::actor_cast<caf::actor>(session));
                  },
                  [self, rp](caf::error& e) mutable {
                    ++self->state.hellos_refused;
                    rp.deliver(to_wire(codec::encode(ErrorMessage{
                                   make_error(ErrorCode::rpc_failed, "authorization: " + caf::to_string(e), "hello")})),
                               caf::actor{});
                  });
          return rp;
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
        [self](stats_atom) -> caf::result<wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes> {
          auto rp =
              self->make_response_promise<wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes, wire_bytes>();
          auto& owners = self->state.owners;
          // allocator, prefix index, authorization, mapper (empty when absent), executor
          // [5]: the reuse coordinator's counts, reported inside the node's own stats.
          auto collected = std::make_shared<std::array<wire_bytes, 6>>();
          auto remaining = std::make_shared<int>((owners.mapper ? 5 : 4) + (owners.reuse ? 1 : 0));
          auto finish = [self, rp, collected, remaining]() mutable {
            if (--*remaining > 0) return;
            OwnerStats node = gateway_stats(self->state);
            if (Result<OwnerStats> reuse = codec::decode<OwnerStats>(as_span((*collected)[5])); reuse.ok()) {
              for (const StatValue& v : reuse->values) node.values.push_back(StatValue{"reuse_" + v.name, v.value});
              if (!reuse->validate_ok && node.validate_ok) {
                node.validate_ok = false;
                node.validate_error = "reuse: " + reuse->validate_error;
              }
            }
            rp.deliver((*collected)[0], (*collected)[1], (*collected)[2], (*collected)[3], (*collected)[4],
                       to_wire(codec::encode(node)));
          };
          auto failed = [](const char* owner, const caf::error& e) {
            OwnerStats s;
            s.owner = owner;
            s.validate_ok = false;
            s.validate_error = "unreachable: " + caf::to_string(e);
            return to_wire(codec::encode(s));
          };
          auto ask = [&](auto owner, size_t index, const char* name) {
            self->request(owner, caf::infinite, stats_atom::value)
                .then(
                    [collected, finish, index](wire_bytes& b) mutable { (*collected)[index] = std::move(b), finish(); },
                    [collected, finish, failed, index, name](caf::error& e) mutable {
                      (*collected)[index] = failed(name, e), finish();
                    });
          };
          ask(owners.allocator, 0, "allocator");
          ask(owners.prefix, 1, "prefix_index");
          ask(owners.authorization, 2, "authorization");
          if (owners.mapper) ask(owners.mapper, 3, "mapper");
          ask(owners.executor, 4, "executor");
          if (owners.reuse) ask(owners.reuse, 5, "reuse");
          return rp;
        },
    };
  };
  return system.spawn(behavior, std::move(owners), std::move(facts), std::move(obs));
}

}  // namespace kvrt::actors
