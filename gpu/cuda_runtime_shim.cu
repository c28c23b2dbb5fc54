// The only nvcc-compiled file of the foundation: device probing, memory and the
// COW byte-range copy kernel (spec 0x05C step "copy valid rows").
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "cuda_runtime_shim.hpp"

namespace {

// One thread block per range; 16-byte vector copies when both ends are
// aligned, four loads in flight per thread before their stores.
__global__ void copy_ranges_kernel(uint8_t* base, const uint64_t* copies) {
  const uint64_t src = copies[3 * blockIdx.x + 0];
  const uint64_t dst = copies[3 * blockIdx.x + 1];
  const uint64_t bytes = copies[3 * blockIdx.x + 2];
  if (((src | dst | bytes) & 15u) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(base + src);
    uint4* d = reinterpret_cast<uint4*>(base + dst);
    const uint64_t n = bytes / 16, step = blockDim.x;
    for (uint64_t i = threadIdx.x; i < n; i += 4 * step) {
      uint4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (i + k * step < n) v[k] = s[i + k * step];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (i + k * step < n) d[i + k * step] = v[k];
    }
  } else {
    for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) base[dst + i] = base[src + i];
  }
}

// The copy list's device staging, grown once and kept: a cudaMalloc/cudaFree
// pair per call cost more than the copies of a typical COW batch.
std::mutex staging_mutex;
uint64_t* staging = nullptr;
size_t staging_entries = 0;

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

int kvrt_cuda_memcpy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                        int to_device) {
  if (height == 0 || width == 0) return 0;
  const cudaMemcpyKind kind = to_device != 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  // cudaMemcpy2D refuses a pitch above the device's limit (cudaDevAttrMaxPitch,
  // 2^31 - 1 on current parts): a pool laid out with the token outermost can
  // exceed it, and then the rows go one call each. Asked once: kvrt's pools
  // live on device 0 (their attachments' cuda_device).
  static const int max_pitch = [] {
    int pitch = 0;
    return cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, 0) == cudaSuccess ? pitch : 0;
  }();
  cudaError_t rc = cudaSuccess;
  if (height > 1 && dst_pitch <= static_cast<size_t>(max_pitch) && src_pitch <= static_cast<size_t>(max_pitch))
    return static_cast<int>(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, height, kind));
  for (size_t i = 0; i < height; ++i) {
    rc = cudaMemcpy(static_cast<uint8_t*>(dst) + i * dst_pitch, static_cast<const uint8_t*>(src) + i * src_pitch,
                    width, kind);
    if (rc != cudaSuccess) break;
  }
  return static_cast<int>(rc);
}

int kvrt_cuda_copy_ranges(void* base, const uint64_t* copies, size_t count) {
  if (count == 0) return 0;
  std::lock_guard<std::mutex> lock(staging_mutex);
  cudaError_t rc = cudaSuccess;
  if (staging_entries < count * 3) {
    if (staging != nullptr) cudaFree(staging);
    staging = nullptr;
    staging_entries = 0;
    rc = cudaMalloc(&staging, count * 3 * sizeof(uint64_t));
    if (rc != cudaSuccess) return static_cast<int>(rc);
    staging_entries = count * 3;
  }
  rc = cudaMemcpy(staging, copies, count * 3 * sizeof(uint64_t), cudaMemcpyHostToDevice);
  if (rc == cudaSuccess) {
    copy_ranges_kernel<<<static_cast<unsigned>(count), 256>>>(static_cast<uint8_t*>(base), staging);
    rc = cudaGetLastError();
    if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
  }
  return static_cast<int>(rc);
}

const char* kvrt_cuda_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
