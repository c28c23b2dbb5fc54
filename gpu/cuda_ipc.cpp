#include "gpu/cuda_ipc.hpp"

#include "gpu/cuda_attention_shim.hpp"
#include "gpu/cuda_error.hpp"
#include "gpu/cuda_runtime_shim.hpp"

namespace kvrt::gpu {

Result<CudaIpcHandle> cuda_ipc_export(void* device_ptr) {
  CudaIpcHandle h;
  if (int rc = kvrt_cuda_ipc_export(device_ptr, h.bytes.data()); rc != 0) return cuda_error("cudaIpcGetMemHandle", rc);
  return h;
}

CudaIpcMapping::~CudaIpcMapping() { kvrt_cuda_ipc_close(ptr_); }

Result<std::unique_ptr<CudaIpcMapping>> cuda_ipc_import(const CudaIpcHandle& handle) {
  void* p = nullptr;
  if (int rc = kvrt_cuda_ipc_import(handle.bytes.data(), &p); rc != 0) return cuda_error("cudaIpcOpenMemHandle", rc);
  return std::make_unique<CudaIpcMapping>(p);
}

}  // namespace kvrt::gpu
