#pragma once
// What the CUDA side reports about the machine. The GPU reaches the owners
// through three seams only, each the owner's own interface with a CPU and a
// CUDA realisation (docs/architecture.md, "GPU"): the allocator's
// BlockPayloadStore (gpu/cuda_pool_store.hpp), the executor's DecodeKernel
// (gpu/cuda_decode_kernel.hpp) and the mapper's PageBacking
// (gpu/cuda_vmm_backing.hpp). This probe tells which realisation a process
// can use. No CUDA header here: nvcc never sees kvrt's own headers.
#include <string>

namespace kvrt {

// `available` is false (with a reason) when kvrt was built without CUDA,
// when no driver is loaded, or when there is no device: all three mean "run
// the CPU path".
struct CudaDeviceProbe {
  bool built_with_cuda = false;
  bool available = false;
  int device_count = 0;
  std::string device_name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::string reason;  // why not available
};

CudaDeviceProbe probe_cuda_device();

}  // namespace kvrt
