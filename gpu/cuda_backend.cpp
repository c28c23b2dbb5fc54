// ComputeBackend over CUDA device memory (compiled by g++; talks to the
// device only through cuda_runtime_shim.hpp).
#include <vector>

#include "gpu/cuda_error.hpp"
#include "gpu/cuda_runtime_shim.hpp"
#include "services/compute/compute_backend.hpp"

namespace kvrt {
namespace {

using gpu::cuda_error;

class DeviceBuffer final : public BackendBuffer {
 public:
  DeviceBuffer(void* ptr, uint64_t bytes) : ptr_(ptr), bytes_(bytes) {}
  ~DeviceBuffer() override { kvrt_cuda_free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint64_t size_bytes() const override { return bytes_; }
  void* ptr() const { return ptr_; }

 private:
  void* ptr_;
  uint64_t bytes_;
};

Status check_span(const BackendBuffer& b, uint64_t offset, uint64_t bytes) {
  if (bytes > b.size_bytes() || offset > b.size_bytes() - bytes)
    return make_error(ErrorCode::invalid_argument,
                      std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                          " exceed device buffer of " + std::to_string(b.size_bytes()) + " bytes",
                      "offset");
  return Status::success();
}

class CudaBackend final : public ComputeBackend {
 public:
  std::string_view name() const override { return "cuda"; }
  Result<std::unique_ptr<BackendBuffer>> allocate(uint64_t bytes) override {
    void* p = nullptr;
    if (int rc = kvrt_cuda_malloc(&p, bytes); rc != 0) return cuda_error("cudaMalloc", rc);
    return std::unique_ptr<BackendBuffer>(new DeviceBuffer(p, bytes));
  }
  Status write(BackendBuffer& buffer, uint64_t offset, std::span<const uint8_t> data) override {
    KVRT_TRY(check_span(buffer, offset, data.size()));
    auto* dst = static_cast<uint8_t*>(static_cast<DeviceBuffer&>(buffer).ptr()) + offset;
    if (int rc = kvrt_cuda_memcpy_h2d(dst, data.data(), data.size()); rc != 0) return cuda_error("cudaMemcpy", rc);
    return Status::success();
  }
  Status read(const BackendBuffer& buffer, uint64_t offset, std::span<uint8_t> out) override {
    KVRT_TRY(check_span(buffer, offset, out.size()));
    auto* src = static_cast<const uint8_t*>(static_cast<const DeviceBuffer&>(buffer).ptr()) + offset;
    if (int rc = kvrt_cuda_memcpy_d2h(out.data(), src, out.size()); rc != 0) return cuda_error("cudaMemcpy", rc);
    return Status::success();
  }
  Status copy_ranges(BackendBuffer& buffer, std::span<const ByteRangeCopy> copies) override {
    KVRT_TRY(check_copy_ranges(buffer.size_bytes(), copies));
    std::vector<uint64_t> flat;
    flat.reserve(copies.size() * 3);
    for (const auto& c : copies) flat.insert(flat.end(), {c.src_offset, c.dst_offset, c.bytes});
    int rc = kvrt_cuda_copy_ranges(static_cast<DeviceBuffer&>(buffer).ptr(), flat.data(), copies.size());
    if (rc != 0) return cuda_error("copy_ranges_kernel", rc);
    return Status::success();
  }
};

}  // namespace

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

Result<std::unique_ptr<ComputeBackend>> make_cuda_backend() {
  CudaDeviceProbe p = probe_cuda_device();
  if (!p.available) return make_error(ErrorCode::io, p.reason, "cuda");
  return std::unique_ptr<ComputeBackend>(new CudaBackend());
}

}  // namespace kvrt
