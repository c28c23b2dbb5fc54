#pragma once
// Typed errors for the CUDA realisation (compiled by g++ only in a CUDA
// build): a failed runtime call becomes io naming the call, and a machine
// without a usable device answers the probe's reason (field "cuda").
#include <string>

#include "gpu/cuda_probe.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "services/common/result.hpp"

namespace kvrt::gpu {

inline Error cuda_error(const char* what, int rc) {
  return make_error(ErrorCode::io, std::string(what) + " failed: " + kvrt_cuda_error_string(rc), what);
}

inline Status require_cuda_device() {
  const CudaDeviceProbe probe = probe_cuda_device();
  if (!probe.available) return make_error(ErrorCode::io, probe.reason, "cuda");
  return Status::success();
}

}  // namespace kvrt::gpu
