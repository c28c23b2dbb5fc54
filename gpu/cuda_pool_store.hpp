#pragma once
// GPU block pools, shared with workers through CUDA IPC handles
// (`[node] pool_backend = "cuda"`).
//
// Each cache group's pool is one cudaMalloc allocation on device 0 laid out
// byte for byte as its POSIX shared-memory segment would be
// (shm/pool_geometry.hpp: a 4096-byte header, then K and V in the group's
// declared axis order), so the same PoolRowPlan moves the same canonical
// rows and kernels address blocks with the same strides. The node exports
// every allocation through CUDA IPC; the session receipt names the handle
// instead of a segment name (PoolAttachment::cuda_ipc_handle), and a worker
// imports it. The header is written to the device once, published, and
// checked by every importer exactly as an attacher checks a shared-memory
// header: pool id, pool generation, cache group and layout digest must be
// the ones the attachment names, so a replaced pool is refused, never
// written.
//
// Both functions answer the reason as a typed error (io, field "cuda") when
// kvrt was built without CUDA or the machine has no device, so a node
// configured for GPU pools on a CPU machine stops at start-up with that
// reason. Every row movement ends with a device synchronisation: a worker's
// rows are in device memory before its commit reaches the node.
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda_ipc.hpp"
#include "schema/authorization_types.hpp"
#include "schema/session_types.hpp"
#include "services/allocator/allocator_config.hpp"
#include "services/common/result.hpp"
#include "services/executor/kv_view.hpp"
#include "services/identity/cache_layout_manifest.hpp"
#include "shm/shared_pool_store.hpp"

namespace kvrt::gpu {

struct CudaPools {
  std::unique_ptr<shm::SharedPoolStore> store;  // owns the allocations; freed when it goes
  std::vector<PoolAttachment> attachments;      // config group order, with the IPC handles
  // [model layer] views whose bases are device addresses in `store`'s pools,
  // for the node executor's CUDA kernel (gpu/cuda_decode_kernel.hpp).
  std::vector<executor::PagedKvView> layer_views;
};

// The node's side: one zeroed device pool per group of `config` (its pool
// ids, generations and capacity, B_row checked against the manifest), each
// with its published header. Errors: those of the manifest and geometry
// (invalid_manifest, unknown_group, config_field), io (no CUDA, cudaMalloc,
// cudaIpcGetMemHandle).
Result<CudaPools> create_cuda_pools(const CacheLayoutManifest& manifest, const BlockAllocatorConfig& config);

// A worker's side: imports every pool of a session receipt (all must carry
// a CUDA IPC handle), then checks each header. Errors: invalid_argument
// ("pools[g].cuda_ipc_handle") for a missing or malformed handle,
// incompatible ("pools[g].cuda_device") for a pool on another device than
// 0, io (no CUDA, cudaIpcOpenMemHandle), decode_failed (not a published
// kvrt pool), stale_generation, incompatible ("layout_digest"),
// invalid_argument ("pools[g].group" / ".pool") when the header describes
// another pool than the attachment.
// The argument checks of import_cuda_pools, which need no device: every
// pool carries a well-formed handle of device 0. Answers the handles.
Result<std::vector<CudaIpcHandle>> check_gpu_pool_attachments(const std::vector<PoolAttachment>& pools);
std::string gpu_pool_field(size_t g, const char* field);  // "pools[g].field"

Result<std::unique_ptr<shm::SharedPoolStore>> import_cuda_pools(const std::vector<PoolAttachment>& pools,
                                                                const Sha256Digest& layout_digest);

}  // namespace kvrt::gpu
