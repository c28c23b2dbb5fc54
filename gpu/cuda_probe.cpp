// The CUDA build's device probe (gpu/cuda_probe.hpp), over the runtime shim.
#include "gpu/cuda_probe.hpp"

#include "gpu/cuda_runtime_shim.hpp"

namespace kvrt {

CudaDeviceProbe probe_cuda_device() {
  CudaDeviceProbe p;
  p.built_with_cuda = true;
  int count = 0;
  if (int rc = kvrt_cuda_device_count(&count); rc != 0) {
    p.reason = std::string("no CUDA device: ") + kvrt_cuda_error_string(rc);
    return p;
  }
  p.device_count = count;
  if (count == 0) {
    p.reason = "no CUDA device";
    return p;
  }
  char name[256];
  if (int rc = kvrt_cuda_device_info(0, name, sizeof name, &p.compute_capability_major, &p.compute_capability_minor);
      rc != 0) {
    p.reason = std::string("no CUDA device: ") + kvrt_cuda_error_string(rc);
    return p;
  }
  p.device_name = name;
  p.available = true;
  return p;
}

}  // namespace kvrt
