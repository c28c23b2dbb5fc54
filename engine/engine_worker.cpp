// run_engine_worker: attach the node's pools, build the model and
// its cache over them, and run the engine loop. See engine_worker.hpp.
#include "engine/engine_worker.hpp"

#include <memory>

#include "engine/engine_loop.hpp"
#include "engine/session_pools.hpp"
#include "services/identity/layout_loader.hpp"
#include "shm/shm_model_kv_cache.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

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

  ClientOptions client_options;
  client_options.worker_name = options.worker_name;
  client_options.trace = options.trace;
  auto client_result = Client::connect(node, options.token_hex, client_options);
  if (!client_result.ok()) return client_result.error();
  std::unique_ptr<Client> client = std::move(client_result).value();
  const SessionReceipt& session = client->session();
  if (session.layout_sha256 != layout.digest())
    return make_error(ErrorCode::incompatible, "the node serves another layout than " + node.layout_path,
                      "layout_sha256");
  // The engines' model computes K/V and attention on the CPU over the pools
  // it maps: a node whose pools are GPU memory serves `kvrt worker` and
  // kvrt::Client users instead.
  if (session_pools_on_gpu(session))
    return make_error(ErrorCode::incompatible,
                      "the node's pools are GPU memory (pool_backend = \"cuda\"); kvrt run's CPU engines need "
                      "shared-memory pools",
                      "pool_backend");
  // Attach every pool the session receipt names, with its generation and
  // layout: a replaced pool is refused, never written.
  auto store_result = attach_shared_memory_pools(session);
  if (!store_result.ok()) return store_result.error();
  shm::ShmPayloadStore store = std::move(store_result).value();
  auto cache_result = shm::ShmModelKvCache::create(store, layout);
  if (!cache_result.ok()) return cache_result.error();
  std::unique_ptr<shm::ShmModelKvCache> cache = std::move(cache_result).value();
  engine::EngineLoop loop(*client, model, *cache, options,
                          workload::jobs_for_worker(*options.workload, options.worker_index, options.workers));
  auto result_result = loop.run();
  if (!result_result.ok()) return result_result.error();
  EngineResult result = std::move(result_result).value();
  result.funnel = loop.funnel().counts();
  for (size_t b = 0; b < kReuseBucketCount; ++b)
    result.rejections[b] = loop.funnel().rejections(static_cast<ReuseBucket>(b));
  return result;
}

}  // namespace kvrt
