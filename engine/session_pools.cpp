#include "engine/session_pools.hpp"

#include "gpu/cuda_pool_store.hpp"
#include "services/common/descriptor_privacy.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

namespace {

// The descriptors the node handed over, when the session's pools need them.
Result<std::optional<PoolDescriptors>> descriptors_for(Client& client) {
  if (!session_pools_by_descriptor(client.session())) return std::optional<PoolDescriptors>{};
  KVRT_TRY(keep_descriptors_private());
  Result<PoolDescriptors> handed = client.pool_descriptors();
  if (!handed.ok()) return handed.error();
  return std::optional<PoolDescriptors>(std::move(handed).value());
}

// The unnamed pool `p`'s descriptor out of `handed`, checked against what the
// session receipt says of the pool.
Result<shm::BlockPoolSegment> attach_by_descriptor(const PoolAttachment& p, PoolDescriptors* handed,
                                                   const Sha256Digest& layout) {
  const std::string label = "pool " + std::to_string(p.pool.value);
  if (handed != nullptr)
    for (size_t i = 0; i < handed->pools.size(); ++i) {
      const PoolAttachment& h = handed->pools[i];
      if (h.pool != p.pool || !handed->descriptors[i]) continue;
      if (h.generation != p.generation || h.group != p.group || h.segment_bytes != p.segment_bytes)
        return make_error(ErrorCode::stale_generation,
                          label + ": the node handed over generation " + std::to_string(h.generation.value) +
                              " of group " + std::to_string(h.group.value) + ", the session names generation " +
                              std::to_string(p.generation.value) + " of group " + std::to_string(p.group.value),
                          "pools");
      return shm::BlockPoolSegment::attach_descriptor(std::move(handed->descriptors[i]), label, p.generation, layout);
    }
  return make_error(ErrorCode::pool_fd_missing,
                    label + " has no name, and no descriptor of it was handed over (Client::pool_descriptors)",
                    "pools");
}

}  // namespace

bool session_pools_on_gpu(const SessionReceipt& session) {
  for (const PoolAttachment& p : session.pools)
    if (!p.cuda_ipc_handle.empty()) return true;
  return false;
}

bool session_pools_by_descriptor(const SessionReceipt& session) {
  for (const PoolAttachment& p : session.pools)
    if (p.by_descriptor) return true;
  return false;
}

Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(Client& client) {
  Result<std::optional<PoolDescriptors>> handed = descriptors_for(client);
  if (!handed.ok()) return handed.error();
  return attach_session_pools(client.session(), *handed ? &**handed : nullptr);
}

Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(const SessionReceipt& session,
                                                                   PoolDescriptors* handed) {
  if (session.pools.empty()) return make_error(ErrorCode::invalid_argument, "the session names no pool", "pools");
  size_t on_gpu = 0;
  for (const PoolAttachment& p : session.pools) on_gpu += p.cuda_ipc_handle.empty() ? 0 : 1;
  if (on_gpu == session.pools.size()) return gpu::import_cuda_pools(session.pools, session.layout_sha256);
  if (on_gpu != 0)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(on_gpu) + " of the session's " + std::to_string(session.pools.size()) +
                          " pools are GPU memory and the others shared memory",
                      "pools");
  Result<shm::ShmPayloadStore> store = attach_shared_memory_pools(session, handed);
  if (!store.ok()) return store.error();
  return std::unique_ptr<shm::SharedPoolStore>(std::make_unique<shm::ShmPayloadStore>(std::move(*store)));
}

Result<shm::ShmPayloadStore> attach_shared_memory_pools(Client& client) {
  Result<std::optional<PoolDescriptors>> handed = descriptors_for(client);
  if (!handed.ok()) return handed.error();
  return attach_shared_memory_pools(client.session(), *handed ? &**handed : nullptr);
}

Result<shm::ShmPayloadStore> attach_shared_memory_pools(const SessionReceipt& session, PoolDescriptors* handed) {
  std::vector<shm::BlockPoolSegment> segments;
  for (const PoolAttachment& p : session.pools) {
    Result<shm::BlockPoolSegment> s =
        p.by_descriptor ? attach_by_descriptor(p, handed, session.layout_sha256)
                        : shm::BlockPoolSegment::attach(p.segment_name, p.generation, session.layout_sha256);
    if (!s.ok()) return s.error();
    segments.push_back(std::move(*s));
  }
  return shm::ShmPayloadStore::create(std::move(segments));
}

}  // namespace kvrt
