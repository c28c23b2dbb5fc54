#include "engine/session_pools.hpp"

#include "gpu/cuda_pool_store.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

bool session_pools_on_gpu(const SessionReceipt& session) {
  for (const PoolAttachment& p : session.pools)
    if (!p.cuda_ipc_handle.empty()) return true;
  return false;
}

Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(const SessionReceipt& session) {
  if (session.pools.empty()) return make_error(ErrorCode::invalid_argument, "the session names no pool", "pools");
  size_t on_gpu = 0;
  for (const PoolAttachment& p : session.pools) on_gpu += p.cuda_ipc_handle.empty() ? 0 : 1;
  if (on_gpu == session.pools.size()) return gpu::import_cuda_pools(session.pools, session.layout_sha256);
  if (on_gpu != 0)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(on_gpu) + " of the session's " + std::to_string(session.pools.size()) +
                          " pools are GPU memory and the others shared memory",
                      "pools");
  Result<shm::ShmPayloadStore> store = attach_shared_memory_pools(session);
  if (!store.ok()) return store.error();
  return std::unique_ptr<shm::SharedPoolStore>(std::make_unique<shm::ShmPayloadStore>(std::move(*store)));
}

Result<shm::ShmPayloadStore> attach_shared_memory_pools(const SessionReceipt& session) {
  std::vector<shm::BlockPoolSegment> segments;
  for (const PoolAttachment& p : session.pools) {
    Result<shm::BlockPoolSegment> s =
        shm::BlockPoolSegment::attach(p.segment_name, p.generation, session.layout_sha256);
    if (!s.ok()) return s.error();
    segments.push_back(std::move(*s));
  }
  return shm::ShmPayloadStore::create(std::move(segments));
}

}  // namespace kvrt
