#pragma once
// The pools a session receipt names, attached in this worker process: K/V
// is shared through shared memory on the CPU and CUDA IPC handles on the
// GPU. A receipt names either POSIX shared-memory segments (segment
// names) or GPU allocations (CUDA IPC handles), never a mix; either way the
// worker gets one SharedPoolStore that writes and reads canonical rows at
// the slots its receipts name, after every pool's header was checked
// against the generation and layout the receipt names (a replaced pool is
// refused, never written).
#include <memory>

#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/common/result.hpp"
#include "shm/shared_pool_store.hpp"
#include "shm/shm_payload_store.hpp"

namespace kvrt {

// Errors: invalid_argument ("pools") for none or for a mix of GPU and
// shared-memory pools, and those of BlockPoolSegment::attach /
// ShmPayloadStore::create or gpu::import_cuda_pools.
Result<std::unique_ptr<shm::SharedPoolStore>> attach_session_pools(const SessionReceipt& session);

// The shared-memory path of attach_session_pools, for a caller that needs
// the mapped segments themselves (kvrt run's engines build their model's
// K/V views over them). Errors: those of BlockPoolSegment::attach and
// ShmPayloadStore::create.
Result<shm::ShmPayloadStore> attach_shared_memory_pools(const SessionReceipt& session);

// Whether the receipt's pools are GPU memory.
bool session_pools_on_gpu(const SessionReceipt& session);

}  // namespace kvrt
