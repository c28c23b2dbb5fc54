#pragma once
// Spawn functions of the node's actors. Each owner actor holds its owner's
// service (a plain C++ class in services/<owner>/) and only translates
// messages: decode, one call, encode (owner_routes.hpp), plus the sans-IO
// runs of the cross-owner protocols it drives (run_driver.hpp). Include only
// from actors/*.cpp.
#include <functional>
#include <memory>

#include "actors/actor_protocol.hpp"
#include "metrics/route_latency.hpp"
#include "services/authorization/authorization_service.hpp"
#include "services/authorization/trust_domain_plan.hpp"
#include "services/prefix/prefix_service.hpp"
#include "services/prompt/prompt_module_service.hpp"
#include "services/radix/radix_block_service.hpp"
#include "services/telemetry/chrome_trace.hpp"
#include "services/tier/session_tier_service.hpp"

namespace spdlog {
class logger;
}

namespace kvrt::actors {

// What every actor of one process records into; each may be null (off).
struct Observability {
  ChromeTraceRecorder* trace = nullptr;
  std::shared_ptr<spdlog::logger> log;       // null: spdlog's default logger
  metrics::RouteLatency* latency = nullptr;  // receipt latency per route ([metrics])
};

// The node's owners. of(o) is the handle that answers owner o's routes,
// statistics and session ends (invalid: the node does not serve it).
struct OwnerHandles {
  allocator_actor allocator;
  prefix_actor prefix;
  authorization_actor authorization;
  mapper_actor mapper;  // invalid when the node serves no mapper
  executor_actor executor;
  reuse_actor reuse;  // the executable-reuse coordinator

  owner_interface of(Owner o) const {
    switch (o) {
      case Owner::reuse:
        return reuse;
      case Owner::prefix_index:
        return prefix;
      case Owner::allocator:
        return allocator;
      case Owner::authorization:
        return authorization;
      case Owner::mapper:
        return mapper;
      case Owner::executor:
        return executor;
    }
    return {};
  }
};

allocator_actor spawn_allocator_actor(caf::actor_system& system, std::shared_ptr<AllocatorService> service,
                                      Observability obs);
prefix_actor spawn_prefix_actor(caf::actor_system& system, std::shared_ptr<PrefixService> service,
                                allocator_actor allocator, Observability obs);

// The radix index owner behind the prefix-index interface ([node]
// prefix_index = "radix"): same messages, same receipts.
prefix_actor spawn_radix_prefix_actor(caf::actor_system& system, std::shared_ptr<RadixBlockService> service,
                                      allocator_actor allocator, Observability obs);

executor_actor spawn_executor_actor(caf::actor_system& system, std::shared_ptr<ExecutorService> service,
                                    allocator_actor allocator, Observability obs);

// Null service: no mapper actor (the handle stays invalid).
mapper_actor spawn_mapper_actor(caf::actor_system& system, std::shared_ptr<MapperService> service, Observability obs);

// `prefixes[d]`: trust domain d's index owner (one, unless [node]
// domain_pools); a namespace's grants, invalidations and purges go to its
// domain's owners. Each domain's allocator and reuse coordinator arrive
// later, as (purge_atom, d, allocator, reuse): they are spawned after this
// actor, which they call.
authorization_actor spawn_authorization_actor(caf::actor_system& system, std::shared_ptr<AuthorizationService> service,
                                              std::vector<prefix_actor> prefixes, TrustDomainPlan domains,
                                              Observability obs);

// What the reuse coordinator knows of the node's paged pools.
struct ReuseNodeFacts {
  std::vector<PoolGenerationRef> pools;  // every pool and its generation
  uint32_t block_tokens = 0;             // P [tokens / block]
  uint32_t cache_groups = 0;             // handles per bundle
  // The coordinator's fault points (ReuseBatchRun::fault_point_names), armed
  // through the node's fault_arm route; null unless [node] fault_injection.
  std::shared_ptr<FaultPoints> faults;
  // The session tier (0x0CC, [tier]): the session_save and session_resume
  // routes; null: they answer invalid_argument (no tier on this node).
  std::shared_ptr<SessionTierService> tier;
  // Prompt Cache's schemas and module store (0x0CB): the prompt_* routes.
  std::shared_ptr<PromptModuleService> prompts;
};

// `owners.reuse` is ignored (the coordinator calls the other owners).
reuse_actor spawn_reuse_actor(caf::actor_system& system, OwnerHandles owners, ReuseNodeFacts facts, Observability obs);

// `role`: the principal's (SessionReceipt::admin), which decides the routes
// the session may call (RouteAccess).
session_actor spawn_session_actor(caf::actor_system& system, SessionId session, RouteAccess role, OwnerHandles owners);

// Facts the gateway adds to every SessionReceipt (pools, layout).
struct NodeFacts {
  Sha256Digest layout_sha256;
  uint32_t block_tokens = 0;
  std::vector<PoolAttachment> pools;  // every pool of the node
  std::string channel_socket;         // the session channel's socket; empty: none
  std::string reuse_policy_id;        // the prefix reuse policy (0x07D), as receipts name it
  // Which domain's owners serve a session, and the pools of each domain
  // (one domain, holding every pool, unless [node] domain_pools).
  TrustDomainPlan domains = TrustDomainPlan::shared();
  std::vector<std::vector<PoolAttachment>> domain_pools;
  // The node process's own counters beyond the owners' (the KV event
  // publisher's, the scrape endpoint's), reported under "node"; null: none.
  // Called on the gateway's thread: it must be thread-safe.
  std::function<std::vector<StatValue>()> process_values;
};

// `domains[d]`: the owners serving trust domain d's sessions (the
// authorization owner and the mapper are the same in each).
gateway_actor spawn_gateway_actor(caf::actor_system& system, std::vector<OwnerHandles> domains, NodeFacts facts,
                                  Observability obs);

}  // namespace kvrt::actors
