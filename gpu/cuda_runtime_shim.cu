// The only nvcc-compiled file of the foundation: device probing, memory and the
// COW byte-range copy kernel (spec 0x05C step "copy valid rows").
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "cuda_runtime_shim.hpp"

namespace {

// One thread block per range; 16-byte vector copies when both ends are aligned.
__global__ void copy_ranges_kernel(uint8_t* base, const uint64_t* copies) {
  const uint64_t src = copies[3 * blockIdx.x + 0];
  const uint64_t dst = copies[3 * blockIdx.x + 1];
  const uint64_t bytes = copies[3 * blockIdx.x + 2];
  if (((src | dst | bytes) & 15u) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(base + src);
    uint4* d = reinterpret_cast<uint4*>(base + dst);
    for (uint64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
  } else {
    for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) base[dst + i] = base[src + i];
  }
}

}  // namespace

extern "C" {

int kvrt_cuda_device_count(int* count) {
  *count = 0;
  return static_cast<int>(cudaGetDeviceCount(count));
}

int kvrt_cuda_device_info(int device, char* name, size_t name_len, int* major, int* minor) {
  cudaDeviceProp prop{};
  cudaError_t rc = cudaGetDeviceProperties(&prop, device);
  if (rc != cudaSuccess) return static_cast<int>(rc);
  std::strncpy(name, prop.name, name_len - 1);
  name[name_len - 1] = '\0';
  *major = prop.major;
  *minor = prop.minor;
  return 0;
}

int kvrt_cuda_malloc(void** ptr, size_t bytes) { return static_cast<int>(cudaMalloc(ptr, bytes)); }
int kvrt_cuda_free(void* ptr) { return static_cast<int>(cudaFree(ptr)); }

int kvrt_cuda_memcpy_h2d(void* dst, const void* src, size_t bytes) {
  return static_cast<int>(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
int kvrt_cuda_memcpy_d2h(void* dst, const void* src, size_t bytes) {
  return static_cast<int>(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

int kvrt_cuda_copy_ranges(void* base, const uint64_t* copies, size_t count) {
  if (count == 0) return 0;
  uint64_t* dev_copies = nullptr;
  cudaError_t rc = cudaMalloc(&dev_copies, count * 3 * sizeof(uint64_t));
  if (rc != cudaSuccess) return static_cast<int>(rc);
  rc = cudaMemcpy(dev_copies, copies, count * 3 * sizeof(uint64_t), cudaMemcpyHostToDevice);
  if (rc == cudaSuccess) {
    copy_ranges_kernel<<<static_cast<unsigned>(count), 256>>>(static_cast<uint8_t*>(base), dev_copies);
    rc = cudaGetLastError();
    if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
  }
  cudaFree(dev_copies);
  return static_cast<int>(rc);
}

const char* kvrt_cuda_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
