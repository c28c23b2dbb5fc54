// Linked instead of the CUDA backend when kvrt is configured without nvcc or
// with -DKVRT_WITH_CUDA=OFF: every caller takes the CPU path.
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

}  // namespace kvrt
