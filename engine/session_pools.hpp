#pragma once
// The pools a session receipt names, attached in this worker process: K/V
// is shared through shared memory on the CPU and CUDA IPC handles on the
// GPU. A receipt names either POSIX shared-memory segments (by name, or
// unnamed segments whose descriptors the node hands to the session over
// its channel) or GPU allocations (CUDA IPC handles), never a mix; either
// way the worker gets one SharedPoolStore that writes and reads canonical
// rows at the slots its receipts name, after every pool's header was
// checked against the generation and layout the receipt names (a replaced
// pool is refused, never written).
#include <memory>

#include "actors/client.hpp"
#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"
#include "shm/shared_pool_store.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

// The pools of the client's session; for unnamed segments it first asks the
// node for their descriptors (Client::pool_descriptors). Errors:
// invalid_argument ("pools") for none or for a mix of GPU and shared-memory
// pools, those of Client::pool_descriptors, and those of
// BlockPoolSegment::attach / attach_descriptor, ShmPayloadStore::create or
// gpu::import_cuda_pools.
Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(Client& client);
// The same from a receipt alone, with the descriptors already received
// (none: every pool must have a name or be GPU memory).
Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(const SessionReceipt& session,
                                                                   PoolDescriptors* handed = nullptr);

// The shared-memory path, for a caller that needs the mapped segments
// themselves (kvrt run's engines build their model's K/V views over them).
Result<shm::ShmPayloadStore> attach_shared_memory_pools(Client& client);
// Errors, beyond BlockPoolSegment's and ShmPayloadStore::create's:
// pool_fd_missing for an unnamed pool `handed` holds no descriptor for.
Result<shm::ShmPayloadStore> attach_shared_memory_pools(const SessionReceipt& session,
                                                        PoolDescriptors* handed = nullptr);

// Whether the receipt's pools are GPU memory.
bool session_pools_on_gpu(const SessionReceipt& session);
// Whether any of the receipt's pools is an unnamed segment.
bool session_pools_by_descriptor(const SessionReceipt& session);

}  // namespace kvrt
