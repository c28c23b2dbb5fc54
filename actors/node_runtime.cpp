// `kvrt node`: the node process composition. See node_runtime.hpp.
#include "actors/node_runtime.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "actors/actor_settings.hpp"
#include "actors/channel_server.hpp"
#include "actors/node_metrics_endpoint.hpp"
#include "actors/owner_actors.hpp"
#include "events/kv_event_publisher.hpp"
#include "gpu/cuda_decode_kernel.hpp"
#include "gpu/cuda_pool_store.hpp"
#include "node/node_config.hpp"
#include "node/node_predecessor.hpp"
#include "services/authorization/trust_domain_plan.hpp"
#include "services/common/descriptor_privacy.hpp"
#include "services/common/process_identity.hpp"
#include "services/identity/layout_loader.hpp"
#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/page_pool_server.hpp"
#include "services/prefix/prefix_batch_run.hpp"
#include "services/reuse/reuse_batch_run.hpp"
#include "services/session/node_descriptor.hpp"
#include "shm/segment_name.hpp"
#include "shm/shared_block_pools.hpp"
#include "shm/shm_model_kv_cache.hpp"

namespace kvrt {

namespace {

GenerationFacts node_generation_facts(const CacheLayoutManifest& layout) {
  GenerationFacts f;
  f.layout = layout;
  // The reference model's position contract: absolute RoPE positions from 0.
  f.artifact.position_contract_sha256 = sha256("kvrt.position_contract.absolute_rope.v1").hex();
  return f;
}

std::shared_ptr<spdlog::logger> node_logger() {
  static std::atomic<uint32_t> instances{0};
  const std::string name = "node" + std::to_string(instances++);
  auto log = spdlog::stderr_color_mt(name);
  log->set_pattern(fmt::format("[%H:%M:%S.%e] [node pid {}] [%^%l%$] %v", ::getpid()));
  log->set_level(spdlog::get_level());
  return log;
}

std::vector<uint64_t> block_id_bases(const AllocatorService& allocator, const CacheLayoutManifest& layout) {
  std::vector<uint64_t> base;
  for (uint32_t g = 0; g < layout.cache_groups.size(); ++g)
    base.push_back(allocator.core().handle_of(g, 0).block.value);
  return base;
}

}  // namespace

namespace {

// One trust domain's pools and the owners over them: the node has one
// ([node] domain_pools = false), or one per trust domain of its
// authorization configuration (TrustDomainPlan).
struct DomainOwners {
  std::optional<shm::SharedBlockPools> pools;       // [node] pool_backend = shm
  std::unique_ptr<shm::SharedPoolStore> gpu_pools;  // [node] pool_backend = cuda
  std::vector<PoolAttachment> attachments;          // this domain's pools, as sessions attach them
  std::shared_ptr<AllocatorService> allocator;
  // The reuse coordinator's fault points ([node] fault_injection only); the
  // allocator's NodeFaultPoints arms them by address, so they live as long
  // as the node, not as long as the reuse actor.
  std::shared_ptr<FaultPoints> reuse_faults;
  std::shared_ptr<PrefixService> prefix;           // [node] prefix_index = hash_chain
  std::shared_ptr<RadixBlockService> radix;        // [node] prefix_index = radix
  std::unique_ptr<shm::ShmModelKvCache> kv_views;  // the executor's per-layer views of the pools
  std::shared_ptr<ExecutorService> executor;
};

}  // namespace

// Member order is destruction order reversed: the actor system (and with it
// every actor) goes before the services and the pools' payload store.
struct NodeInstance::Impl {
  std::string descriptor_path;
  std::string token_dir;
  TrustDomainPlan domain_plan = TrustDomainPlan::shared();
  // The index owners' event sink ([events]): outlives the owners, which
  // hold it by pointer.
  std::unique_ptr<events::KvEventPublisher> events;
  // [metrics]: receipt latency per route (the owners record into it) and
  // the live alert evaluation (the gateway reports it under "node").
  std::unique_ptr<metrics::RouteLatency> latency;
  std::unique_ptr<metrics::NodeAlertMonitor> alerts;
  std::vector<DomainOwners> domains;  // [trust domain]
  std::shared_ptr<AuthorizationService> authorization;
  std::shared_ptr<MapperService> mapper;        // null: no [mapper] section
  std::unique_ptr<PagePoolServer> pool_server;  // before the mapper it serves, in destruction
  // Unnamed pool segments' descriptors, for the session channel to hand out.
  std::shared_ptr<const actors::PoolDescriptorTable> pool_descriptors;
  std::unique_ptr<ChromeTraceRecorder> trace;
  std::shared_ptr<spdlog::logger> log;
  NodeDescriptor descriptor;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> system;
  std::vector<caf::actor> actors;
  std::unique_ptr<actors::ChannelServer> channel;        // its threads talk to the system: stopped first
  std::unique_ptr<actors::NodeMetricsEndpoint> metrics;  // as do the endpoint's

  ~Impl() {
    metrics.reset();
    channel.reset();
    for (const caf::actor& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    system.reset();  // joins the scheduler's threads
    if (trace) (void)trace->flush();
    std::error_code ec;
    std::filesystem::remove(descriptor_path, ec);
    std::filesystem::remove_all(token_dir, ec);
    if (log) spdlog::drop(log->name());
  }
};

namespace {

// The mapper owner over cache group 0's shape (its layers, K/V heads, head
// width and K dtype), its page pool handed to workers through a socket in
// the token directory (mode 0700).
struct NodeMapper {
  std::shared_ptr<MapperService> service;
  std::unique_ptr<PagePoolServer> server;
  MapperAttachment attachment;
};

Result<NodeMapper> start_mapper(const std::string& token_dir, const NodeMapperConfig& m,
                                const CacheLayoutManifest& layout, PoolGeneration generation) {
  const CacheGroupLayout& g = layout.cache_groups.at(0);
  MapperConfig c;
  c.local_layers = g.layers();
  c.request_slots = m.request_slots;
  c.max_tokens = m.max_tokens;
  c.kv_heads = g.kv_heads_local;
  c.head_dim = g.head_dim;
  c.element_bytes = scalar_bytes(g.k_dtype);
  c.page_group_bytes = m.page_group_bytes != 0 ? m.page_group_bytes : MemfdBacking::os_page_bytes();
  c.handle_count = m.handle_count;
  Result<std::unique_ptr<MapperService>> mapper = MapperService::create(c, generation, m.map_ahead);
  if (!mapper.ok()) return mapper.error();
  NodeMapper out;
  out.service = std::move(mapper).value();
  const MapperGeometry& geo = out.service->geometry();
  PagePoolOffer offer;
  offer.identity = PagePoolIdentity{c.page_group_bytes, c.handle_count, generation};
  offer.view_pages = static_cast<uint32_t>(geo.virtual_reserved_bytes() / c.page_group_bytes);
  MapperAttachment a{c.local_layers,  c.request_slots,    c.max_tokens,   c.kv_heads,       c.head_dim,
                     c.element_bytes, c.page_group_bytes, c.handle_count, generation.value, token_dir + "/mapper.sock"};
  Result<std::unique_ptr<PagePoolServer>> server =
      PagePoolServer::start(a.socket_path, out.service->pool_fd(), std::move(offer));
  if (!server.ok()) return server.error();
  out.server = std::move(server).value();
  out.attachment = a;
  return out;
}

}  // namespace

NodeInstance::NodeInstance(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeInstance::~NodeInstance() = default;
uint16_t NodeInstance::port() const { return impl_->descriptor.port; }
const std::string& NodeInstance::descriptor_path() const { return impl_->descriptor_path; }

namespace {

// The authorization owner first: it issues the workers' tokens, written once
// to files only this user can read (a token directory of mode 0700).
Status start_authorization(NodeInstance::Impl& impl, const NodeConfig& config, const CacheLayoutManifest& layout,
                           const std::string& descriptor_path) {
  Result<NamespaceAuthority> authority =
      NamespaceAuthority::create(config.authorization, node_generation_facts(layout));
  if (!authority.ok()) return authority.error();
  // Absolute: the descriptor names the token directory and the sockets in
  // it, and a worker started from another directory must find them.
  std::error_code ec;
  impl.token_dir = std::filesystem::absolute(descriptor_path, ec).string() + ".tokens";
  if (ec) return make_error(ErrorCode::io, "cannot resolve " + descriptor_path + ": " + ec.message(), "descriptor");
  std::filesystem::create_directories(impl.token_dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + impl.token_dir + ": " + ec.message(), "descriptor");
  ::chmod(impl.token_dir.c_str(), 0700);
  impl.descriptor.token_dir = impl.token_dir;
  for (const IssuedToken& t : authority->take_issued_tokens())
    KVRT_TRY(write_token_file(impl.descriptor.token_path(t.principal_name), t.token.reveal_hex()));
  impl.authorization = std::make_shared<AuthorizationService>(std::move(*authority), config.authorization);
  return Status::success();
}

// What the executor owner reads the pools through: one view per model layer
// and, for device pools, the CUDA decode kernel (empty: the CPU kernel).
struct ExecutorInputs {
  std::vector<executor::PagedKvView> layer_views;
  ExecutorService::DecodeKernel kernel;
  ExecutorService::SharedPrefixKernel shared_kernel;
};

// Device pools on GPU 0 (gpu/cuda_pool_store.hpp), their IPC handles in the
// descriptor; the executor runs the CUDA decode kernel over them.
Result<ExecutorInputs> create_cuda_pools(DomainOwners& impl, const NodeConfig& config,
                                         const CacheLayoutManifest& layout,
                                         const shm::SharedBlockPoolsOptions& pool_options,
                                         const AllocatorServiceOptions& allocator_options) {
  BlockAllocatorConfig allocator_config;
  KVRT_TRY_ASSIGN(allocator_config, shm::shared_pools_allocator_config(layout, pool_options));
  Result<gpu::CudaPools> gpu_pools = gpu::create_cuda_pools(layout, allocator_config);
  if (!gpu_pools.ok())
    return make_error(gpu_pools.error().code,
                      config.config_path + ": pool_backend = \"cuda\": " + gpu_pools.error().reason, "pool_backend");
  impl.gpu_pools = std::move(gpu_pools->store);
  impl.attachments = std::move(gpu_pools->attachments);
  Result<BlockAllocator> allocator = BlockAllocator::create(allocator_config, impl.gpu_pools.get());
  if (!allocator.ok()) return allocator.error();
  impl.allocator = std::make_shared<AllocatorService>(std::move(allocator).value(), allocator_options);
  Result<gpu::CudaDecodeKernel> kernel = gpu::make_cuda_decode_kernel();
  if (!kernel.ok()) return kernel.error();
  Result<gpu::CudaSharedPrefixKernel> shared_kernel = gpu::make_cuda_shared_prefix_kernel();
  if (!shared_kernel.ok()) return shared_kernel.error();
  return ExecutorInputs{std::move(gpu_pools->layer_views), std::move(*kernel), std::move(*shared_kernel)};
}

// Pools in POSIX shared memory named by this node's instance, their segment
// names in the descriptor; the executor reads them in place, layer by layer.
Result<ExecutorInputs> create_shm_pools(DomainOwners& impl, const CacheLayoutManifest& layout,
                                        const shm::SharedBlockPoolsOptions& pool_options,
                                        const AllocatorServiceOptions& allocator_options) {
  Result<shm::SharedBlockPools> pools = shm::SharedBlockPools::create(layout, pool_options);
  if (!pools.ok()) return pools.error();
  impl.pools.emplace(std::move(*pools));
  for (uint32_t g = 0; g < impl.pools->store().group_count(); ++g) {
    const shm::BlockPoolSegment& s = impl.pools->store().segment(g);
    PoolAttachment a{s.group(), s.pool_id(), s.pool_generation(), s.name(), s.geometry().segment_bytes()};
    if (s.unnamed()) {
      // No name to publish: the session channel hands the descriptor to the
      // sessions the authorization owner allows.
      a.segment_name.clear();
      a.by_descriptor = true;
    }
    impl.attachments.push_back(std::move(a));
  }
  // The payload store stays with the pools (it outlives the actors); the
  // allocator core moves into its owner.
  impl.allocator = std::make_shared<AllocatorService>(std::move(impl.pools->allocator()), allocator_options);
  Result<std::unique_ptr<shm::ShmModelKvCache>> kv_views = shm::ShmModelKvCache::create(impl.pools->store(), layout);
  if (!kv_views.ok()) return kv_views.error();
  impl.kv_views = std::move(kv_views).value();
  uint32_t layers = 0;
  for (const CacheGroupLayout& g : layout.cache_groups) layers = std::max(layers, g.layer_end);
  ExecutorInputs inputs;
  for (uint32_t l = 0; l < layers; ++l) inputs.layer_views.push_back(impl.kv_views->layer_view(l));
  return inputs;
}

// The block quotas of the authorization configuration, for the allocator
// owner that enforces them.
BlockQuotaConfig block_quotas(const AuthorizationConfig& auth) {
  BlockQuotaConfig q;
  for (const DomainConfig& d : auth.domains) q.domains.push_back(DomainQuota{d.name, d.quota_blocks});
  for (const NamespaceConfig& n : auth.namespaces) {
    NamespaceQuota nq{n.name(), n.quota_blocks, std::nullopt};
    for (uint32_t d = 0; d < auth.domains.size(); ++d)
      if (n.domain == auth.domains[d].name) nq.domain = d;
    q.namespaces.push_back(std::move(nq));
  }
  return q;
}

// The pools, the allocator over them and the executor that reads them: one
// allocator configuration and one executor construction for either backend.
Status start_pool_owners(NodeInstance::Impl& impl, const NodeConfig& config, const CacheLayoutManifest& layout,
                         PoolGeneration pool_generation) {
  const std::string instance = shm::make_instance_id();
  impl.descriptor.instance = instance;
  const uint32_t groups = static_cast<uint32_t>(layout.cache_groups.size());
  auto descriptors = std::make_shared<actors::PoolDescriptorTable>();
  std::vector<std::vector<PoolAttachment>> by_domain;
  impl.domains.resize(impl.domain_plan.domain_count());
  for (uint32_t d = 0; d < impl.domains.size(); ++d) {
    DomainOwners& domain = impl.domains[d];
    shm::SharedBlockPoolsOptions pool_options;
    pool_options.pool_generation = pool_generation;
    // Each domain's pools have ids of their own, so a handle names its
    // domain's pool set and no other domain resolves it.
    pool_options.first_pool_id = PoolId{1 + d * groups};
    pool_options.namespace_name = impl.domains.size() == 1 ? "node" : "domain" + std::to_string(d);
    pool_options.namespace_generation = NamespaceGeneration{1};
    pool_options.instance = instance;
    pool_options.capacity = shm::PoolCapacity::blocks(config.blocks_per_group);
    pool_options.max_requests = config.max_requests;
    pool_options.zero_on_recycle = config.zero_on_recycle;
    pool_options.unnamed_segments = config.pool_segments == PoolSegments::unnamed;
    const AllocatorServiceOptions allocator_options{.fault_injection = config.fault_injection,
                                                    .quotas = block_quotas(config.authorization)};
    Result<ExecutorInputs> inputs = config.pool_backend == PoolBackend::cuda
                                        ? create_cuda_pools(domain, config, layout, pool_options, allocator_options)
                                        : create_shm_pools(domain, layout, pool_options, allocator_options);
    if (!inputs.ok()) return inputs.error();
    Result<std::unique_ptr<ExecutorService>> executor =
        ExecutorService::create(layout, std::move(inputs->layer_views), block_id_bases(*domain.allocator, layout), 1,
                                std::move(inputs->kernel), std::move(inputs->shared_kernel));
    if (!executor.ok()) return executor.error();
    domain.executor = std::move(executor).value();
    for (const PoolAttachment& a : domain.attachments) impl.descriptor.pools.push_back(a);
    by_domain.push_back(domain.attachments);
    if (!domain.pools) continue;
    for (uint32_t g = 0; g < domain.pools->store().group_count(); ++g) {
      const shm::BlockPoolSegment& s = domain.pools->store().segment(g);
      if (!s.unnamed()) continue;
      // The session channel sends a dup of it; the segment keeps its own.
      UniqueFd dup(::fcntl(s.descriptor(), F_DUPFD_CLOEXEC, 0));
      if (!dup)
        return make_error(ErrorCode::io, std::string("cannot keep a pool descriptor: ") + std::strerror(errno),
                          "pool_segments");
      descriptors->emplace(s.pool_id().value, std::move(dup));
    }
  }
  if (!descriptors->empty()) {
    KVRT_TRY(keep_descriptors_private());
    impl.authorization->serve_pool_descriptors(std::move(by_domain), impl.domain_plan);
    impl.pool_descriptors = std::move(descriptors);
  }
  return Status::success();
}

// The prefix-reuse owner the config names, one per trust domain; same
// messages either way.
Status start_prefix_owners(NodeInstance::Impl& impl, const NodeConfig& config, const CacheLayoutManifest& layout) {
  for (DomainOwners& domain : impl.domains) {
    if (config.prefix_index == PrefixIndexKind::radix) {
      Result<RadixBlockService> radix =
          RadixBlockService::create(layout, config.radix_budget_blocks, config.radix_eviction, config.reuse_policy);
      if (!radix.ok()) return radix.error();
      domain.radix = std::make_shared<RadixBlockService>(std::move(*radix));
      domain.radix->set_event_sink(impl.events.get());
      continue;
    }
    PrefixIndexConfig prefix_config;
    KVRT_TRY_ASSIGN(prefix_config, PrefixIndexConfig::from_layout(layout));
    prefix_config.policy = config.reuse_policy;
    prefix_config.events = impl.events.get();
    Result<PrefixService> prefix = PrefixService::create(prefix_config);
    if (!prefix.ok()) return prefix.error();
    domain.prefix = std::make_shared<PrefixService>(std::move(*prefix));
  }
  return Status::success();
}

// The node process's own values in its statistics (under "node"): the KV
// event publisher's counters, and the live alerts of 0x0CF as 0/1.
std::vector<StatValue> node_process_values(const events::KvEventPublisher* publisher,
                                           const metrics::NodeAlertMonitor* alerts) {
  std::vector<StatValue> out;
  if (publisher) {
    const events::KvEventPublisherStats s = publisher->stats();
    out.push_back({"kv_events_published", static_cast<int64_t>(s.events_published)});
    out.push_back({"kv_events_dropped", static_cast<int64_t>(s.events_dropped)});
    out.push_back({"kv_event_batches_published", static_cast<int64_t>(s.batches_published)});
    out.push_back({"kv_event_replays_served", static_cast<int64_t>(s.replays_served)});
  }
  if (alerts) {
    const metrics::AlertEvaluation a = alerts->current();
    for (size_t i = 0; i < kAlertCount; ++i)
      out.push_back({"alert_" + std::string(to_string(static_cast<Alert>(i))), a.active[i] ? 1 : 0});
  }
  return out;
}

AlertPolicy alert_policy(const NodeMetricsConfig& c) {
  AlertPolicy policy;
  policy.reference_leak_grace_ms = c.reference_leak_grace_ms;
  policy.map_wait_slo_budget_ms = c.map_wait_slo_ms;
  policy.stable_tolerance_percent = c.stable_tolerance_percent;
  return policy;
}

// The publisher of [events]: vLLM's KVEventsConfig fields, the pools'
// medium as vLLM names it.
events::KvEventPublisherConfig kv_event_publisher_config(const NodeConfig& config) {
  events::KvEventPublisherConfig e;
  e.endpoint = config.events.endpoint;
  e.replay_endpoint = config.events.replay_endpoint;
  e.buffer_steps = config.events.buffer_steps;
  e.hwm = static_cast<int32_t>(config.events.hwm);
  e.max_queue_size = config.events.max_queue_size;
  e.topic = config.events.topic;
  e.wire.hash_format = config.events.int_block_hashes ? events::BlockHashFormat::int64 : events::BlockHashFormat::bytes;
  e.wire.data_parallel_rank = static_cast<int32_t>(config.events.data_parallel_rank);
  e.medium = config.pool_backend == PoolBackend::cuda ? "GPU" : "CPU";
  return e;
}

void log_reclaim(spdlog::logger& log, const PredecessorReclaim& r) {
  if (r.predecessor_pid)
    log.warn("a dead node (pid {}) left this descriptor: removed it{}; pools start at generation {}",
             *r.predecessor_pid, r.token_dir_removed ? " and its token directory (tokens, sockets)" : "",
             r.pool_generation.value);
  if (r.segments_removed > 0)
    log.warn("removed {} stale pool segment(s) of dead owners from /dev/shm ({} bytes)", r.segments_removed,
             r.segment_bytes_removed);
}

actors::RuntimeSettings node_runtime_settings(const NodeConfig& config) {
  actors::RuntimeSettings runtime{config.scheduler_threads, config.heartbeat_interval_ms, config.connection_timeout_ms};
  if (config.scheduler == NodeScheduler::polling) {
    runtime.policy = actors::SchedulerPolicy::stealing;
    runtime.poll_attempts = config.scheduler_poll_attempts;
  }
  return runtime;
}

// One actor per owner, the reuse coordinator over them and the gateway in
// front; the session channel beside the gateway when configured. The
// gateway is returned for publishing.
Result<actors::gateway_actor> spawn_node_actors(NodeInstance::Impl& impl, const NodeConfig& config,
                                                const CacheLayoutManifest& layout, const actors::Observability& obs) {
  actors::apply_runtime_settings(impl.cfg, node_runtime_settings(config));
  impl.system = std::make_unique<caf::actor_system>(impl.cfg);
  caf::actor_system& system = *impl.system;
  const NodeDescriptor& d = impl.descriptor;
  // Every owner's fault points are named before the allocator's actor, which
  // answers the fault_arm route, exists (one domain: the config refuses
  // fault_injection with domain_pools).
  if (config.fault_injection) {
    DomainOwners& only = impl.domains.front();
    only.reuse_faults = std::make_shared<FaultPoints>();
    only.allocator->fault_points().add("reuse", *only.reuse_faults, ReuseBatchRun::fault_point_names());
    only.allocator->fault_points().add("purge", impl.authorization->purge_faults(),
                                       AuthorizationService::purge_fault_point_names());
    if (impl.mapper)
      only.allocator->fault_points().add("mapper", impl.mapper->faults(), FaultPointBacking::fault_point_names());
    if (only.radix) {
      std::vector<std::string> radix_points = PrefixBatchRun<RadixBlockService>::fault_point_names();
      radix_points.emplace_back(kRadixEvictFaultPoint);
      only.allocator->fault_points().add(RadixBlockService::kFaultOwner, only.radix->faults(), radix_points);
    } else
      only.allocator->fault_points().add(PrefixService::kFaultOwner, only.prefix->faults(),
                                         PrefixBatchRun<PrefixService>::fault_point_names());
  }
  // Each trust domain's allocator, index and executor; the authorization
  // owner and the mapper serve every domain.
  std::vector<actors::OwnerHandles> owners(impl.domains.size());
  std::vector<actors::prefix_actor> prefixes;
  for (size_t x = 0; x < impl.domains.size(); ++x) {
    DomainOwners& domain = impl.domains[x];
    actors::OwnerHandles& o = owners[x];
    o.allocator = actors::spawn_allocator_actor(system, domain.allocator, obs);
    o.prefix = domain.radix ? actors::spawn_radix_prefix_actor(system, domain.radix, o.allocator, obs)
                            : actors::spawn_prefix_actor(system, domain.prefix, o.allocator, obs);
    caf::anon_send(o.allocator, actors::events_atom::value, o.prefix);
    o.executor = actors::spawn_executor_actor(system, domain.executor, o.allocator, obs);
    prefixes.push_back(o.prefix);
  }
  auto authorization_handle =
      actors::spawn_authorization_actor(system, impl.authorization, prefixes, impl.domain_plan, obs);
  auto mapper_handle = actors::spawn_mapper_actor(system, impl.mapper, obs);
  actors::NodeFacts facts;
  facts.layout_sha256 = d.layout_sha256;
  facts.block_tokens = d.block_tokens;
  facts.pools = d.pools;
  facts.reuse_policy_id = std::string(policy_id(config.reuse_policy));
  facts.domains = impl.domain_plan;
  for (size_t x = 0; x < impl.domains.size(); ++x) {
    owners[x].authorization = authorization_handle;
    owners[x].mapper = mapper_handle;
    actors::ReuseNodeFacts reuse_facts;
    for (const PoolAttachment& p : impl.domains[x].attachments)
      reuse_facts.pools.push_back(PoolGenerationRef{p.pool, p.generation});
    reuse_facts.block_tokens = d.block_tokens;
    reuse_facts.cache_groups = static_cast<uint32_t>(impl.domains[x].attachments.size());
    reuse_facts.faults = impl.domains[x].reuse_faults;
    if (config.tier.enabled) {
      // One tier per trust domain, each with its share of the budget: a
      // domain's histories never sit beside another's, and each tier is
      // used by its own reuse actor alone.
      const size_t n = impl.domains.size();
      const std::string dir = n == 1 ? config.tier.directory : config.tier.directory + "/domain-" + std::to_string(x);
      std::vector<uint64_t> row_bytes;
      for (const CacheGroupLayout& g : layout.cache_groups) row_bytes.push_back(g.row_bytes());
      Result<std::unique_ptr<SessionTierService>> tier =
          SessionTierService::open(SessionTierConfig{dir, (config.tier.budget_mib << 20) / n}, std::move(row_bytes));
      if (!tier.ok()) return tier.error();
      reuse_facts.tier = std::move(tier).value();
    }
    reuse_facts.prompts =
        std::make_shared<PromptModuleService>(reuse_facts.pools, reuse_facts.block_tokens, reuse_facts.cache_groups);
    owners[x].reuse = actors::spawn_reuse_actor(system, owners[x], std::move(reuse_facts), obs);
    caf::anon_send(authorization_handle, actors::purge_atom::value, static_cast<uint32_t>(x), owners[x].allocator,
                   owners[x].reuse);
    facts.domain_pools.push_back(impl.domains[x].attachments);
  }
  if (config.session_channel) facts.channel_socket = impl.token_dir + "/session.sock";
  facts.process_values = [publisher = impl.events.get(), alerts = impl.alerts.get()] {
    return node_process_values(publisher, alerts);
  };
  impl.descriptor.channel_socket = facts.channel_socket;
  auto gateway = actors::spawn_gateway_actor(system, owners, facts, obs);
  impl.actors = {caf::actor_cast<caf::actor>(gateway), caf::actor_cast<caf::actor>(authorization_handle)};
  for (const actors::OwnerHandles& o : owners)
    for (caf::actor a : {caf::actor_cast<caf::actor>(o.prefix), caf::actor_cast<caf::actor>(o.allocator)})
      impl.actors.push_back(a);
  if (mapper_handle) impl.actors.push_back(caf::actor_cast<caf::actor>(mapper_handle));
  for (const actors::OwnerHandles& o : owners) {
    impl.actors.push_back(caf::actor_cast<caf::actor>(o.executor));
    impl.actors.push_back(caf::actor_cast<caf::actor>(o.reuse));
  }
  if (config.session_channel) {
    Result<std::unique_ptr<actors::ChannelServer>> channel = actors::ChannelServer::start(
        system, gateway, facts.channel_socket, obs, impl.pool_descriptors,
        actors::ChannelLiveness{config.heartbeat_interval_ms, config.connection_timeout_ms});
    if (!channel.ok()) return channel.error();
    impl.channel = std::move(channel).value();
  }
  return gateway;
}

}  // namespace

Result<std::unique_ptr<NodeInstance>> NodeInstance::start(const NodeRunOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->log = node_logger();
  NodeConfig config;
  KVRT_TRY_ASSIGN(config, load_node_config(options.config_path));
  if (options.port_override >= 0) config.port = static_cast<uint16_t>(options.port_override);
  CacheLayoutManifest layout;
  KVRT_TRY_ASSIGN(layout, load_layout_manifest(config.layout_path));
  NodeDescriptor& d = impl->descriptor;
  d.host = config.host;
  d.node_pid = static_cast<uint32_t>(::getpid());
  ProcessIdentity self;
  KVRT_TRY_ASSIGN(self, current_process_identity());
  d.node_start_ticks = self.start_time_ticks;
  d.layout_path = std::filesystem::absolute(config.layout_path).string();
  d.layout_sha256 = layout.digest();
  d.block_tokens = layout.allocator_block_size;

  PredecessorReclaim reclaimed;
  KVRT_TRY_ASSIGN(reclaimed, reclaim_predecessor(options.descriptor_path));
  log_reclaim(*impl->log, reclaimed);
  // From here on the descriptor path is this node's: a start that fails
  // later removes what it wrote there. One refused above (a live node's
  // path) is left alone.
  impl->descriptor_path = options.descriptor_path;
  KVRT_TRY(start_authorization(*impl, config, layout, options.descriptor_path));
  if (config.domain_pools) KVRT_TRY_ASSIGN(impl->domain_plan, TrustDomainPlan::create(config.authorization));
  KVRT_TRY(start_pool_owners(*impl, config, layout, reclaimed.pool_generation));
  if (config.events.enabled) {
    Result<std::unique_ptr<events::KvEventPublisher>> publisher =
        events::KvEventPublisher::start(kv_event_publisher_config(config));
    if (!publisher.ok()) return publisher.error();
    impl->events = std::move(publisher).value();
    // A node starts cleared: its first batch says so, and a router that
    // followed a predecessor at the same address drops what that one held.
    impl->events->on_event(KvAllBlocksCleared{});
    d.events_endpoint = impl->events->endpoint();
    d.events_replay_endpoint = impl->events->replay_endpoint();
  }
  KVRT_TRY(start_prefix_owners(*impl, config, layout));
  if (config.mapper.enabled) {
    Result<NodeMapper> mapper = start_mapper(impl->token_dir, config.mapper, layout, reclaimed.pool_generation);
    if (!mapper.ok()) return mapper.error();
    impl->mapper = std::move(mapper->service);
    impl->pool_server = std::move(mapper->server);
    d.mapper = mapper->attachment;
  }

  if (!options.trace_path.empty()) impl->trace = std::make_unique<ChromeTraceRecorder>(options.trace_path, "kvrt node");
  if (config.metrics.enabled) {
    impl->latency = std::make_unique<metrics::RouteLatency>();
    impl->alerts =
        std::make_unique<metrics::NodeAlertMonitor>(alert_policy(config.metrics), config.metrics.alert_window_ms);
  }
  const actors::Observability obs{impl->trace.get(), impl->log, impl->latency.get()};
  Result<actors::gateway_actor> gateway = spawn_node_actors(*impl, config, layout, obs);
  if (!gateway.ok()) return gateway.error();
  auto port = impl->system->middleman().publish(*gateway, config.port, config.host.c_str(), true);
  if (!port)
    return make_error(
        ErrorCode::node_unreachable,
        "cannot listen on " + config.host + ":" + std::to_string(config.port) + ": " + caf::to_string(port.error()),
        "port");
  d.port = *port;
  if (config.metrics.enabled) {
    const metrics::NodeMetricsFacts facts{layout.row_bytes(), static_cast<uint32_t>(layout.cache_groups.size())};
    Result<std::unique_ptr<actors::NodeMetricsEndpoint>> endpoint = actors::NodeMetricsEndpoint::start(
        *impl->system, *gateway, config.metrics, facts, impl->latency.get(), impl->alerts.get());
    if (!endpoint.ok()) return endpoint.error();
    impl->metrics = std::move(endpoint).value();
    d.metrics_url = impl->metrics->url();
  }
  KVRT_TRY(write_node_descriptor(d, options.descriptor_path));
  impl->log->info("serving on {}:{} ({} cache groups x {} blocks, descriptor {})", config.host, *port, d.pools.size(),
                  config.blocks_per_group, options.descriptor_path);
  if (!d.metrics_url.empty()) impl->log->info("metrics at {}", d.metrics_url);
  return std::unique_ptr<NodeInstance>(new NodeInstance(std::move(impl)));
}

Status run_node(const NodeRunOptions& options) {
  // SIGINT and SIGTERM are blocked before any thread exists (the actor
  // system starts threads and they inherit the mask), so only this thread
  // receives them, through sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Result<std::unique_ptr<NodeInstance>> node = NodeInstance::start(options);
  if (!node.ok()) return node.error();
  if (options.on_ready) options.on_ready();
  int received = 0;
  sigwait(&signals, &received);
  spdlog::info("kvrt node: signal {}, shutting down", received);
  node->reset();
  return Status::success();
}

}  // namespace kvrt
