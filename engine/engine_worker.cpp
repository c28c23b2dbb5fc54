// run_engine_worker: attach the node's pools, build the model and
// its cache over them, and run the engine loop. See engine_worker.hpp.
#include "engine/engine_worker.hpp"

#include <memory>

#include "engine/engine_loop.hpp"
#include "engine/session_pools.hpp"
#include "engine/staged_model_kv_cache.hpp"
#include "engine/virtual_engine.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/shm_model_kv_cache.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

namespace {

// What an engine serves through: a session on one node and that node's
// pools, mapped as the model's cache (declared so that the cache goes
// before the store it maps).
struct NodeBinding {
  std::unique_ptr<EngineSession> session;
  std::unique_ptr<shm::SharedPoolStore> store;
  std::unique_ptr<model::ModelKvCache> cache;
  std::string node_instance;  // the node's instance id: a restarted node has another
};

// A session on `node` as this engine's options say, refused when the node
// serves another layout than the one the engine computes with.
Result<std::unique_ptr<EngineSession>> connect_session(const NodeDescriptor& node, const std::string& token_hex,
                                                       const CacheLayoutManifest& layout,
                                                       const EngineOptions& options) {
  ClientOptions client_options;
  client_options.worker_name = options.worker_name;
  client_options.trace = options.trace;
  client_options.channel_only = options.channel_only;
  std::unique_ptr<EngineSession> session;
  KVRT_TRY_ASSIGN(session, EngineSession::connect(node, token_hex, client_options));
  if (session->session().layout_sha256 != layout.digest())
    return make_error(ErrorCode::incompatible, "the node serves another layout than " + node.layout_path,
                      "layout_sha256");
  return session;
}

// This worker's share of the workload.
std::vector<const workload::Job*> jobs_of(const EngineOptions& options) {
  return options.one_tenant_per_worker
             ? workload::jobs_for_tenant_worker(*options.workload, options.worker_index, options.workers)
             : workload::jobs_for_worker(*options.workload, options.worker_index, options.workers);
}

// The node's block pools of `b.session`, attached as `b.store` and mapped
// as the model's cache `b.cache`. Every pool the session receipt names is
// attached with its generation and layout: a replaced pool is refused,
// never written.
Status attach_pools(NodeBinding& b, const CacheLayoutManifest& layout, const EngineOptions& options) {
  // Pools in GPU memory (imported through CUDA IPC) cannot be computed in
  // by the CPU model: it computes over a host copy and moves rows through
  // the store (engine/staged_model_kv_cache.hpp). --staged-pools does the
  // same over shared memory.
  if (session_pools_on_gpu(b.session->session()) || options.staged_pools) {
    KVRT_TRY_ASSIGN(b.store, attach_session_pools(b.session->client()));
    std::unique_ptr<engine::StagedModelKvCache> staged;
    KVRT_TRY_ASSIGN(staged, engine::StagedModelKvCache::create(*b.store, layout));
    b.cache = std::move(staged);
    return Status::success();
  }
  auto store_result = attach_shared_memory_pools(b.session->client());
  if (!store_result.ok()) return store_result.error();
  auto shm_store = std::make_unique<shm::ShmPayloadStore>(std::move(store_result).value());
  auto cache_result = shm::ShmModelKvCache::create(*shm_store, layout);
  if (!cache_result.ok()) return cache_result.error();
  b.store = std::move(shm_store);
  b.cache = std::move(cache_result).value();
  return Status::success();
}

Result<NodeBinding> bind_node(const NodeDescriptor& node, const std::string& token_hex,
                              const CacheLayoutManifest& layout, const EngineOptions& options) {
  NodeBinding b;
  KVRT_TRY_ASSIGN(b.session, connect_session(node, token_hex, layout, options));
  b.node_instance = node.instance;
  KVRT_TRY(attach_pools(b, layout, options));
  return b;
}

// Marks an error of the first binding (kBeforeAdmission).
Error before_admission(Error e) {
  e.reason = std::string(kBeforeAdmission) + e.reason;
  return e;
}

// A node whose layout declares virtual pages (vAttention, 0x06): requests
// live in the mapper owner's request slots, seen through this worker's own
// view of the node's page pool. With reuse, the node's block pools are
// attached too: they hold the published prompt rows that hits are copied
// from and that each prompt's computed rows are copied into. No
// reconnection: a lost node sends the rest of the share down the private
// path (the slots and pages went with it).
Result<EngineResult> run_virtual_worker(const NodeDescriptor& node, const EngineOptions& options,
                                        const CacheLayoutManifest& layout, const model::ReferenceModel& model) {
  // The virtual engine copies hits between the block pools and its slots
  // through host views; it has no staged moves.
  if (options.staged_pools)
    return make_error(ErrorCode::config_field,
                      "staged pools serve paged pools; a layout of virtual pages computes in the mapper's page views",
                      "staged_pools");
  Result<MapperPoolView> view = VirtualModelKvCache::attach_view(node, layout);
  if (!view.ok()) return before_admission(view.error());
  NodeBinding b;
  Result<std::unique_ptr<EngineSession>> session = connect_session(node, options.token_hex, layout, options);
  if (!session.ok()) return before_admission(session.error());
  b.session = std::move(session).value();
  if (options.reuse) {
    if (Status attached = attach_pools(b, layout, options); !attached.ok()) return before_admission(attached.error());
    if (b.cache->staged())
      return make_error(ErrorCode::incompatible,
                        "the node's block pools are GPU memory; a layout of virtual pages needs them in host memory",
                        "pool_backend");
  }
  std::unique_ptr<VirtualModelKvCache> cache;
  KVRT_TRY_ASSIGN(cache, VirtualModelKvCache::create(layout, *view));
  return engine::run_virtual_engine(*b.session, *view, *cache, b.cache.get(), model, options, jobs_of(options));
}

}  // namespace

Result<EngineResult> run_engine_worker(const NodeDescriptor& node, const EngineOptions& options) {
  if (options.workload == nullptr || options.workers == 0 || options.worker_index >= options.workers ||
      options.in_flight == 0)
    return make_error(ErrorCode::invalid_argument,
                      "an engine worker needs a workload, 0 <= index < workers and "
                      "in_flight > 0",
                      "engine_options");
  auto layout_result = load_layout_manifest(node.layout_path);
  if (!layout_result.ok()) return layout_result.error();
  CacheLayoutManifest layout = std::move(layout_result).value();
  if (layout.digest() != node.layout_sha256)
    return make_error(ErrorCode::incompatible, "layout file " + node.layout_path + " changed since the node started",
                      "layout_sha256");
  auto model_result = model::ReferenceModel::create(options.model, layout);
  if (!model_result.ok()) return model_result.error();
  model::ReferenceModel model = std::move(model_result).value();
  if (options.workload->vocab != options.model.vocab)
    return make_error(ErrorCode::config_field,
                      "workload vocab " + std::to_string(options.workload->vocab) + " differs from the model's " +
                          std::to_string(options.model.vocab),
                      "workload.vocab");

  if (layout.physical_mode == PhysicalMode::virtual_pages) return run_virtual_worker(node, options, layout, model);
  Result<NodeBinding> first = bind_node(node, options.token_hex, layout, options);
  if (!first.ok()) return before_admission(first.error());
  NodeBinding binding = std::move(first).value();
  engine::EngineLoop loop(*binding.session, model, *binding.cache, options, jobs_of(options));
  if (!options.reconnect_descriptor.empty()) {
    // A node other than the lost one (another instance id), serving the
    // descriptor path: the binding is replaced, the old one's client and
    // pool mappings go.
    loop.set_rebind([&]() -> Result<std::pair<EngineSession*, model::ModelKvCache*>> {
      Result<NodeDescriptor> d = read_node_descriptor(options.reconnect_descriptor);
      if (!d.ok()) return d.error();
      if (d->instance == binding.node_instance)
        return make_error(ErrorCode::node_unreachable, "no new node yet", "node");
      Result<std::string> token = read_token_file(d->token_path(options.reconnect_principal));
      if (!token.ok()) return token.error();
      Result<NodeBinding> next = bind_node(*d, *token, layout, options);
      if (!next.ok()) return next.error();
      // The cache maps the old store: it goes first, then the store, then
      // the old session.
      binding.cache.reset();
      binding.store.reset();
      binding.session.reset();
      binding = std::move(next).value();
      return std::pair<EngineSession*, model::ModelKvCache*>(binding.session.get(), binding.cache.get());
    });
  }
  auto result_result = loop.run();
  if (!result_result.ok()) return result_result.error();
  EngineResult result = std::move(result_result).value();
  result.funnel = loop.funnel().counts();
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    result.rejections[b] = loop.funnel().rejections(static_cast<ReuseBucket>(b));
  return result;
}

}  // namespace kvrt
