#pragma once
// CUDA IPC of pools in cudaMalloc memory, imported by another process: with
// the GPU backend, session receipts carry these handles instead of segment
// names. The node exports each pool once;
// a worker process imports the 64-byte handle and its kernels read the pool
// in place. VMM-backed pools travel as POSIX fds instead
// (gpu/cuda_vmm_backing.hpp): cudaIpcGetMemHandle does not work on them.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "services/common/result.hpp"

namespace kvrt::gpu {

struct CudaIpcHandle {
  std::array<uint8_t, 64> bytes{};
  // 128 lowercase hex digits, for a command line or a text receipt.
  std::string hex() const;
  // invalid_argument (field `handle`) unless exactly 128 hex digits.
  static Result<CudaIpcHandle> from_hex(std::string_view text);
};

// The handle of the cudaMalloc allocation that starts at device_ptr.
Result<CudaIpcHandle> cuda_ipc_export(void* device_ptr);

// An imported allocation, open until destroyed. A process cannot import a
// handle it exported itself (CUDA refuses): importers are other processes.
class CudaIpcMapping {
 public:
  explicit CudaIpcMapping(void* device_ptr) : ptr_(device_ptr) {}
  ~CudaIpcMapping();
  CudaIpcMapping(const CudaIpcMapping&) = delete;
  CudaIpcMapping& operator=(const CudaIpcMapping&) = delete;
  void* data() const { return ptr_; }

 private:
  void* ptr_;
};

Result<std::unique_ptr<CudaIpcMapping>> cuda_ipc_import(const CudaIpcHandle& handle);

}  // namespace kvrt::gpu
