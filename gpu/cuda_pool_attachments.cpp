// Checks of GPU pool attachments that need no device (gpu/cuda_pool_store.hpp);
// built with and without CUDA, so a malformed session receipt gets the same
// typed error on every machine.
#include "gpu/cuda_pool_store.hpp"

namespace kvrt::gpu {

std::string gpu_pool_field(size_t g, const char* field) { return "pools[" + std::to_string(g) + "]." + field; }

Result<std::vector<CudaIpcHandle>> check_gpu_pool_attachments(const std::vector<PoolAttachment>& pools) {
  if (pools.empty()) return make_error(ErrorCode::invalid_argument, "a session names no pool to import", "pools");
  std::vector<CudaIpcHandle> handles;
  for (size_t g = 0; g < pools.size(); ++g) {
    const PoolAttachment& a = pools[g];
    if (a.cuda_ipc_handle.empty())
      return make_error(ErrorCode::invalid_argument,
                        "pool " + std::to_string(a.pool.value) + " is not a GPU pool (no CUDA IPC handle)",
                        gpu_pool_field(g, "cuda_ipc_handle"));
    if (a.cuda_device != 0)
      return make_error(ErrorCode::incompatible,
                        "pool " + std::to_string(a.pool.value) + " is on device " + std::to_string(a.cuda_device) +
                            "; kvrt imports pools of device 0 only",
                        gpu_pool_field(g, "cuda_device"));
    Result<CudaIpcHandle> handle = CudaIpcHandle::from_hex(a.cuda_ipc_handle);
    if (!handle.ok())
      return make_error(ErrorCode::invalid_argument,
                        "pool " + std::to_string(a.pool.value) + ": " + handle.error().reason,
                        gpu_pool_field(g, "cuda_ipc_handle"));
    handles.push_back(*handle);
  }
  return handles;
}

}  // namespace kvrt::gpu
