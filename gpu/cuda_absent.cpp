// Linked instead of the CUDA backend when kvrt is configured without nvcc or
// with -DKVRT_WITH_CUDA=OFF: every caller takes the CPU path.
#include "gpu/cuda_vmm_backing.hpp"
#include "services/compute/compute_backend.hpp"

namespace kvrt {

CudaDeviceProbe probe_cuda_device() {
  CudaDeviceProbe p;
  p.reason = "no CUDA device: kvrt was built without CUDA";
  return p;
}

Result<std::unique_ptr<ComputeBackend>> make_cuda_backend() {
  return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda");
}

// The mapper's CUDA realisation is absent too: callers use MemfdBacking.
Result<uint64_t> cuda_vmm_granularity(int) { return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda"); }

Result<std::unique_ptr<CudaVmmBacking>> make_cuda_vmm_backing(int) {
  return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda");
}

Result<std::unique_ptr<CudaPeerView>> map_cuda_peer_view(int, std::span<const int>, uint64_t) {
  return make_error(ErrorCode::io, probe_cuda_device().reason, "cuda");
}

}  // namespace kvrt
